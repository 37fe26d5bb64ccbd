"""LFM2's gated short convolution (``short_conv`` layers): one descriptor, everything the analytic families need.

Sizes: ``d = d_model`` channels, ``L = short_conv.d_conv`` taps. Parts (breakdown keys):
``short_conv/in_proj`` (d -> 3d: B, C and x), ``short_conv/conv1d`` (a depthwise causal conv of L taps
over ``B * x``: ``d*L`` weights and, with ``bias``, d biases), ``short_conv/out_proj`` (d -> d); in_proj
and out_proj have biases iff ``short_conv.bias`` (transformers' ``conv_bias`` sets all three).

FLOPs follow transformers' slow path (``Lfm2ShortConv`` without the causal-conv1d kernels), which
llmcalc's reference runs: ``B * x`` (one multiply per element), the conv, ``C * conv`` (one multiply)
and out_proj. The conv is ``F.conv1d(padding=L-1)`` over the ``S`` new tokens of a pass that starts
the sequence: ``S + L - 1`` outputs computed, the last ``L - 1`` dropped (FlopCounterMode counts all
``2*B*(S+L-1)*L*d``); a pass that continues a cached sequence (a decode step, as transformers'
``causal_conv1d_update``; a later chunk) convolves the ``L`` cached inputs and its ``C`` new ones
without padding: ``C + 1`` outputs.

The cache (the layer's **state**, per sequence, constant in sequence length): the last ``L`` inputs
of the conv, ``d*L`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .keys import boolean, checked, integer
from .mixer import Mixer
from .parts import Linear, Norm, Vector, conv_vector
from .tape import Tape
from .variants import Op

if TYPE_CHECKING:
    from ..spec import RunSpec


@dataclass(frozen=True)
class ShortConvConfig:
    """LFM2's gated short convolution of ``short_conv`` layers (transformers' Lfm2ShortConv): in_proj
    d -> 3d (B, C, x), a depthwise causal conv1d of d_conv taps over B*x, y = C * conv(B*x), out_proj
    d -> d; ``bias``: biases on in_proj, the conv and out_proj (transformers' ``conv_bias``)."""

    d_conv: int = checked(integer(), 3)  # L: the conv's taps (transformers' conv_L_cache), the state's length
    bias: bool = checked(boolean, False)


class ShortConv(Mixer):
    """The gated short convolution of a layer (module docstring)."""

    core = ("short_conv/conv1d",)  # the conv: one kernel

    @property
    def core_io(self) -> tuple[int, int]:
        """B * x (d) in; the conv's output (d) out."""
        d, _ = self.sizes
        return d, d

    @property
    def sizes(self) -> tuple[int, int]:
        """(d, L)."""
        c = self.cfg
        assert c.short_conv is not None, "a short_conv layer without its mapping"
        return c.d_model, c.short_conv.d_conv

    @property
    def bias(self) -> bool:
        return self.cfg.short_conv.bias

    def linears(self) -> list[Linear]:
        d, _ = self.sizes
        return [Linear("short_conv/in_proj", d, 3 * d, self.bias), Linear("short_conv/out_proj", d, d, self.bias)]

    def norms(self) -> list[Norm]:
        return []

    def vectors(self) -> list[Vector]:
        d, L = self.sizes
        return [conv_vector("short_conv/conv1d", d, L, self.bias)]

    @property
    def state_values(self) -> int:
        """Values the layer's state holds per sequence: the last L conv inputs per channel."""
        d, L = self.sizes
        return d * L

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        """The conv, forward (the linears are generic)."""
        d, L = self.sizes
        return {"short_conv/conv1d": 2 * batch * self.conv_outputs(query_len, past, L) * L * d}

    def pass_ops(self, run: RunSpec) -> list[Op]:
        """Forward elementwise ops of a pass (costs: docs/conventions.md)."""
        d, _ = self.sizes
        T = run.tokens
        out = [Op("short_conv/gate", T * d, 1, 3)]  # B * x
        if self.bias:  # the conv's bias, inside the conv
            out.append(Op("short_conv/conv1d", T * d, 1, 0))
        return out + [Op("short_conv/output", T * d, 1, 3)]  # C * conv

    def saves(self, tape: Tape, B: int, S: int, x: str) -> None:
        """What the reference mixer (:mod:`analysis.verify.short_conv`) keeps for backward over ``B x S``
        tokens (a pass from the start), in its forward order: in_proj its input; ``B * x`` B and x (views
        of in_proj's output, whose whole storage counts: B, C, x); the conv its input ``B * x``; ``C *
        conv`` C (the same storage) and the conv's output (a view of it: its whole ``S + L - 1``
        positions); out_proj its input."""
        d, L = self.sizes
        T, b = B * S, tape.b
        tape.linear("short_conv/in_proj", T * d * b, T, x)
        tape.save("short_conv", 3 * T * d * b, "in_proj output")
        tape.save("short_conv/conv1d", T * d * b)  # B * x
        tape.save("short_conv", B * (S + L - 1) * d * b)  # the conv's whole output
        tape.linear("short_conv/out_proj", T * d * b, T)
