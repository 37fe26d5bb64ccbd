"""LoRA adapters (Hu et al., 2021) as PEFT adds them: the parameters they train.

A targeted linear ``d_in -> d_out`` keeps its weight frozen and gains two trainable matrices,
``A`` (``r x d_in``) and ``B`` (``d_out x r``), with no bias: ``r (d_in + d_out)`` parameters;
its output becomes ``W x + (alpha / r) B A x``. Targets are breakdown keys of the layers
(``attention/q``, ``mlp/down``, ``moe/experts``, ...; ``all-linear``: every linear of every
layer, as PEFT's ``all-linear`` takes every linear but the output layer). Stacked experts get an
adapter per expert on each of their matrices (up, gate, down), as PEFT gives each expert's
linears its own. Embeddings, norms and the LM head are never adapted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .config import ModelConfig
from .layout import Layer
from .plan import layer_plan

ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class LoRA:
    """Adapters of rank ``rank`` on the ``targets`` linears of a frozen base."""

    rank: int
    targets: tuple[str, ...] = ("attention/q", "attention/v")  # PEFT's default for Llama-style models
    alpha: float | None = None  # None: alpha = rank (scaling 1)

    def __post_init__(self) -> None:
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"LoRA rank must be a positive integer, got {self.rank!r}")
        if not self.targets:
            raise ValueError("LoRA needs at least one target")

    @property
    def scaling(self) -> float:
        return (self.rank if self.alpha is None else self.alpha) / self.rank


def linear_keys(cfg: ModelConfig) -> list[str]:
    """The breakdown keys of the model's layer linears, in order: what LoRA can target."""
    keys = [m.key for g in layer_plan(cfg) for m in Layer(cfg, g.spec).linears()]
    return list(dict.fromkeys(keys))


def frozen_keys(cfg: ModelConfig) -> list[str]:
    """Components whose matmuls are frozen weights under LoRA: every layer linear and the head
    (also every key a quantized format's skip list can name)."""
    return [*linear_keys(cfg), "lm_head"]


def targeted(cfg: ModelConfig, lora: LoRA) -> list[str]:
    """The keys ``lora`` adapts in ``cfg``; ValueError naming a target the model lacks."""
    available = linear_keys(cfg)
    missing = [t for t in lora.targets if t not in (*available, ALL_LINEAR)]
    if missing:
        raise ValueError(f"{cfg.name} has no linear {', '.join(missing)} to adapt (its linears: "
                         f"{', '.join(available)}, or {ALL_LINEAR})")
    return available if ALL_LINEAR in lora.targets else list(dict.fromkeys(lora.targets))


@functools.lru_cache(maxsize=64)  # asked per layer group by flops, activations and traffic
def adapted(cfg: ModelConfig, lora: LoRA | None) -> frozenset[str]:
    """The keys ``lora`` adapts in ``cfg`` as a set (empty without LoRA)."""
    return frozenset() if lora is None else frozenset(targeted(cfg, lora))


def adapter_params(cfg: ModelConfig, lora: LoRA) -> dict[str, int]:
    """Trainable adapter parameters by component (module docstring)."""
    keys = adapted(cfg, lora)
    out: dict[str, int] = {}
    for group in layer_plan(cfg):
        for m in Layer(cfg, group.spec).linears():
            if m.key in keys:
                out[m.key] = out.get(m.key, 0) + lora.rank * (m.d_in + m.d_out) * m.copies * group.count
    return out
