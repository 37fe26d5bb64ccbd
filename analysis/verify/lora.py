"""LoRA adapters on the reference model, as PEFT adds them.

Every parameter of the model is frozen. A targeted linear ``d_in -> d_out`` gains the submodule
``lora``: trainable ``A`` (``r x d_in``) and ``B`` (``d_out x r``), no bias, and its output
becomes ``W x + scaling * B A x`` (PEFT: ``lora_B(lora_A(dropout(x))) * scaling``, dropout 0).
Stacked experts gain one adapter per expert on each matrix, ``A`` (n, d_in, r) and ``B``
(n, r, d_out). Targets are module names as components (``attention/q``, ``moe/experts``) or
``all-linear``: every ``nn.Linear`` and every stack of experts inside the layers.

The token embeddings' output requires grad, as PEFT's ``enable_input_require_grads`` makes it
(``prepare_model_for_kbit_training`` and gradient checkpointing turn it on): every layer then
computes the gradient of its input, the first one included.

An adapter is a module of its own under the linear it adapts, so its matmuls and what it saves
are the component ``<key>/lora``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .ffn import Experts
from .measure import component_key

ALL_LINEAR = "all-linear"


class Adapter(nn.Module):
    """``scaling * B A x`` for a linear ``d_in -> d_out`` (B starts at zero, as PEFT's)."""

    def __init__(self, d_in: int, d_out: int, rank: int, scaling: float, like: torch.Tensor):
        super().__init__()
        self.scaling = scaling
        self.A = nn.Parameter(torch.empty(rank, d_in, dtype=like.dtype, device=like.device).normal_(std=d_in**-0.5))
        self.B = nn.Parameter(torch.zeros(d_out, rank, dtype=like.dtype, device=like.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.linear(x, self.A), self.B) * self.scaling  # (..., r) then (..., d_out)


class ExpertAdapters(nn.Module):
    """An adapter per expert on each stacked matrix of :class:`~analysis.verify.ffn.Experts`."""

    def __init__(self, experts: Experts, rank: int, scaling: float):
        super().__init__()
        self.scaling = scaling
        for name in ("up", "gate", "down"):
            w = getattr(experts, name)  # (n, d_in, d_out) or None
            if w is not None:
                n, d_in, d_out = w.shape
                a = torch.empty(n, d_in, rank, dtype=w.dtype, device=w.device).normal_(std=d_in**-0.5)
                self.register_parameter(name + "_A", nn.Parameter(a))
                self.register_parameter(name + "_B", nn.Parameter(torch.zeros(n, rank, d_out, dtype=w.dtype,
                                                                             device=w.device)))

    def forward(self, x: torch.Tensor, name: str, experts) -> torch.Tensor:
        """x (n_e, d_in) through expert ``experts``' adapter on ``name``, or (g, m, d_in) through a slice's."""
        a, b = getattr(self, name + "_A")[experts], getattr(self, name + "_B")[experts]
        return (x @ a) @ b * self.scaling


class LoRALinear(nn.Linear):
    """A frozen linear plus its adapter ``lora``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.lora(x)


def _adapt(linear: nn.Linear, rank: int, scaling: float) -> LoRALinear:
    w = linear.weight
    out = LoRALinear(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
    out.weight, out.bias = linear.weight, linear.bias  # the same (frozen) parameters
    out.lora = Adapter(linear.in_features, linear.out_features, rank, scaling, w)
    return out


def add_lora(model: nn.Module, targets: tuple[str, ...], rank: int, alpha: float | None = None) -> list[str]:
    """Freeze ``model`` and adapt its targets in place; returns the components adapted. The
    embeddings' output requires grad (module docstring)."""
    scaling = (rank if alpha is None else alpha) / rank
    for p in model.parameters():
        p.requires_grad_(False)
    adapted = []
    for path, module in list(model.named_modules()):
        if not path.startswith("layers.") or not isinstance(module, (nn.Linear, Experts)):
            continue
        key = component_key(path)
        if ALL_LINEAR not in targets and key not in targets:
            continue
        if isinstance(module, Experts):
            module.lora = ExpertAdapters(module, rank, scaling)
        else:
            parent, _, name = path.rpartition(".")
            setattr(model.get_submodule(parent), name, _adapt(module, rank, scaling))
        adapted.append(key)
    model.embedding["token"].register_forward_hook(lambda mod, args, out: out.requires_grad_(True))
    return list(dict.fromkeys(adapted))
