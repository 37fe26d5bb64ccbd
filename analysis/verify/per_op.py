"""Per-op selective checkpointing (``recompute="op"``) as torchtitan runs it (``selective_ac_option =
"op"``; the policy and its sources: ``analysis.count.recompute``).

Each block runs under ``torch.utils.checkpoint.checkpoint`` with a policy from
``create_selective_checkpoint_contexts``, which sees every aten op of the block's forward after it ran
and keeps the outputs of:

- the matmul of every other ``nn.Linear`` the block calls, the 1st, 3rd, ... in the order it calls
  them (torchtitan keeps every other ``aten.mm``; a linear's one ``mm``, or ``addmm`` with a bias,
  counts here, so that the attention core's and the experts' batched matmuls, which are no linears, do
  not);
- the flash kernel (the aten kernel or ``reference_flash``, one op each): its output and log-sum-exp.

Every other op is recomputed in backward. The policy's cache holds what it keeps, which autograd's
saved-tensor hooks never see: :attr:`PerOp.kept` lists them, by component, for ``measure.py``.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from . import attention  # noqa: F401 (registers llmcalc::reference_flash)

_aten = torch.ops.aten
LINEAR_MATMULS = (_aten.mm.default, _aten.addmm.default)
FLASH_KERNELS = (_aten._scaled_dot_product_flash_attention_for_cpu.default,
                 _aten._scaled_dot_product_flash_attention.default,
                 _aten._scaled_dot_product_efficient_attention.default,
                 _aten._scaled_dot_product_cudnn_attention.default,
                 torch.ops.llmcalc.reference_flash.default)


class PerOp:
    """The policy of one block (module docstring): hooks on its linears say which one runs."""

    def __init__(self, block: nn.Module):
        self.kept: list[tuple[str, object]] = []  # (component, the op's output) kept by the last forward
        self._linear: str | None = None  # the component of the linear running, until its matmul
        for name, module in block.named_modules():
            if isinstance(module, nn.Linear):
                module.register_forward_pre_hook(functools.partial(self._enter, name.replace(".", "/")))
                module.register_forward_hook(self._leave)

    def _enter(self, key: str, module: nn.Module, args) -> None:
        self._linear = key

    def _leave(self, module: nn.Module, args, out) -> None:
        self._linear = None

    def contexts(self):
        """The checkpoint's two contexts for one forward of the block (``context_fn``)."""
        self.kept.clear()
        linears = 0

        def policy(ctx, func, *args, **kwargs) -> CheckpointPolicy:
            nonlocal linears
            if func in FLASH_KERNELS:
                self.kept.append(("attention/sdpa", ctx.op_output))
                return CheckpointPolicy.MUST_SAVE
            if func in LINEAR_MATMULS and self._linear is not None:
                key, self._linear = self._linear, None  # one matmul a linear
                linears += 1
                if linears % 2:
                    self.kept.append((key + "/output", ctx.op_output))
                    return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)
