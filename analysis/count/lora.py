"""LoRA adapters (Hu et al., 2021) as PEFT adds them: the parameters they train.

A targeted linear ``d_in -> d_out`` keeps its weight frozen and gains two trainable matrices,
``A`` (``r x d_in``) and ``B`` (``d_out x r``), with no bias: ``r (d_in + d_out)`` parameters;
its output becomes ``W x + (alpha / r) B A x``. Targets (:class:`~analysis.spec.LoRA`) are
breakdown keys of the layers (``attention/q``, ``mlp/down``, ``moe/experts``, ...; ``all-linear``:
every linear of every layer, as PEFT's ``all-linear`` takes every linear but the output layer).
Stacked experts get an adapter per expert on each of their matrices (up, gate, down), as PEFT
gives each expert's linears its own. Embeddings, norms and the LM head are never adapted.
"""

from __future__ import annotations

import functools

from ..model.architecture import build
from ..model.config import ModelConfig
from ..spec import ALL_LINEAR, LoRA, linear_keys, targeted


def frozen_keys(cfg: ModelConfig) -> list[str]:
    """Components whose matmuls are frozen weights under LoRA: every layer linear and the head."""
    return [*linear_keys(cfg), build(cfg).head.linear.key]


def layer_adapted(linears: list[str], lora: LoRA | None) -> frozenset[str]:
    """The keys of one layer's ``linears`` that ``lora`` adapts: not checked against the layer (a
    full layer of Gemma 4 has no ``attention/v`` its sliding layers have); :func:`adapted` checks the
    targets against the model."""
    if lora is None:
        return frozenset()
    return frozenset(linears) if ALL_LINEAR in lora.targets else frozenset(lora.targets) & set(linears)


@functools.lru_cache(maxsize=64)  # asked per layer group by flops, activations and traffic
def adapted(cfg: ModelConfig, lora: LoRA | None) -> frozenset[str]:
    """The keys ``lora`` adapts in ``cfg`` as a set (empty without LoRA)."""
    return frozenset() if lora is None else frozenset(targeted(cfg, lora))


def adapter_params(cfg: ModelConfig, lora: LoRA) -> dict[str, int]:
    """Trainable adapter parameters by component (module docstring)."""
    keys = adapted(cfg, lora)
    out: dict[str, int] = {}
    for m, layers in build(cfg).layer_linears():
        if m.key in keys:
            out[m.key] = out.get(m.key, 0) + lora.rank * (m.d_in + m.d_out) * m.copies * layers
    return out
