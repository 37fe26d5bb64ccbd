"""The Mamba-2 (SSD) mixer (``mamba2`` layers): one descriptor, everything the analytic families need.

Sizes: ``H`` heads of ``P`` (``mamba2.n_heads``, ``mamba2.head_dim``), ``E = H * P`` channels (``H``
defaults to ``expand * d_model / head_dim``), ``N = mamba2.d_state``, ``G = mamba2.n_groups`` groups of
B and C, ``K = mamba2.d_conv`` taps, ``Q = mamba2.chunk_size``. Parts (breakdown keys):
``mamba2/in_proj`` (d -> 2E + 2GN + H: the gate z, x, B, C and dt), ``mamba2/conv1d`` (a depthwise causal
conv of K taps over x, B and C: ``(E + 2GN)*K`` weights and, with ``conv_bias``, ``E + 2GN`` biases),
``mamba2/dt_bias``, ``mamba2/A_log``, ``mamba2/D`` (H each), ``mamba2/norm`` (the gated RMSNorm's
weight, E; without ``mamba2.norm`` the output is only gated, ``y * silu(z)``: Falcon-H1's default),
``mamba2/out_proj`` (E -> d); in_proj and out_proj have biases iff ``mamba2.proj_bias`` (out_proj's
``mamba2.out_proj_bias`` where given: Falcon-H1's ``projectors_bias``).

The scan is counted as transformers' slow path (``torch_forward``) and llmcalc's reference run it:
the **chunked form** for a pass over ``S`` tokens (training, prefill, a later prefill chunk): the
sequence padded to ``c = ceil(S / Q)`` chunks of ``Q``; per sequence, chunk and head the within-chunk
``C B^T`` (``2*Q*Q*N``) and its product with ``x*dt`` (``2*Q*Q*P``), the chunk's state
(``2*Q*P*N``), the state passing over ``c + 1`` chunk states (``2*(c+1)^2*P*N`` per sequence and
head) and the states' output (``2*Q*N*P``); the **recurrent step** for a decode step (one token
continuing a cached sequence): ``y = h @ C``, ``2*E*N`` per token. The conv: as Mamba-1's
(:mod:`.mamba`), ``S + K - 1`` outputs from the start of a sequence, ``C + 1`` continuing one.

The cache (the layer's **state**, per sequence, constant in sequence length): the last ``K`` inputs of
the conv and the SSM state, ``(E + 2GN)*K + E*N`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .keys import boolean, checked, integer, optional
from .mixer import Mixer
from .parts import Linear, Norm, Vector, conv_vector
from .tape import Tape
from .variants import Op

if TYPE_CHECKING:
    from ..spec import RunSpec

SILU_COST = 4  # x * sigmoid(x): exp, add, divide, multiply
SOFTPLUS_COST = 3  # log(1 + exp(x))
GATED_NORM_COST = 9  # silu(z) (4), the product (1), square-mean, rsqrt, scale (3), the weight (1)


@dataclass(frozen=True)
class Mamba2Config:
    """The Mamba-2 (SSD) mixer of ``mamba2`` layers (transformers' Mamba2Mixer): in_proj d -> 2E + 2GN + H
    (z, x, B, C, dt), a depthwise causal conv1d of d_conv taps over x, B and C, dt_bias, A_log and D per
    head, a gated RMSNorm (weight E, in n_groups groups) and out_proj E -> d; E = n_heads * head_dim."""

    d_state: int = checked(integer(), 128)  # N: the SSM state per head and head dimension
    d_conv: int = checked(integer(), 4)  # K: the depthwise convolution's taps
    expand: int = checked(integer(), 2)  # E = expand * d_model when n_heads is not given
    n_heads: int | None = checked(optional(integer()), None)  # H; None: expand * d_model / head_dim
    head_dim: int = checked(integer(), 64)  # P
    n_groups: int = checked(integer(), 1)  # G: groups of B and C (and of the gated norm); divides n_heads
    conv_bias: bool = checked(boolean, True)
    proj_bias: bool = checked(boolean, False)  # biases of in_proj and out_proj
    chunk_size: int = checked(integer(), 256)  # Q: the chunked scan's chunk (training and prefill)
    norm: bool = checked(boolean, True)  # the gated RMSNorm on the output; false: y * silu(z) alone (Falcon-H1)
    out_proj_bias: bool | None = checked(optional(boolean), None)  # out_proj's own bias; None: proj_bias


class Mamba2(Mixer):
    """The Mamba-2 mixer of a layer (module docstring)."""

    core = ("mamba2/scan", "mamba2/conv1d", "mamba2/A_log")  # the conv, the chunked scan and A: one kernel

    @property
    def chunk(self) -> int:
        return self.sizes[6]

    @property
    def core_io(self) -> tuple[int, int]:
        """x, B and C into the conv (E + 2GN) and dt (H) in; y (E) out."""
        E, H, _, N, G, _, _ = self.sizes
        return E + 2 * G * N + H, E

    @property
    def sizes(self) -> tuple[int, int, int, int, int, int, int]:
        """(E, H, P, N, G, K, Q)."""
        return self.cfg.mamba2_sizes

    def linears(self) -> list[Linear]:
        c, (E, H, _, N, G, _, _) = self.cfg, self.sizes
        m = c.mamba2
        out_bias = m.proj_bias if m.out_proj_bias is None else m.out_proj_bias
        return [Linear("mamba2/in_proj", c.d_model, 2 * E + 2 * G * N + H, m.proj_bias),
                Linear("mamba2/out_proj", E, c.d_model, out_bias)]

    def norms(self) -> list[Norm]:
        return []  # the gated norm's weight is a vector (its FLOPs: ops)

    def vectors(self) -> list[Vector]:
        E, H, _, N, G, K, _ = self.sizes
        conv = E + 2 * G * N
        return [conv_vector("mamba2/conv1d", conv, K, self.cfg.mamba2.conv_bias),
                Vector("mamba2/dt_bias", H), Vector("mamba2/A_log", H), Vector("mamba2/D", H)] + (
                [Vector("mamba2/norm", E)] if self.cfg.mamba2.norm else [])

    @property
    def state_values(self) -> int:
        """Values the layer's state holds per sequence: K conv inputs of x, B and C, and H x P x N."""
        E, _, _, N, G, K, _ = self.sizes
        return (E + 2 * G * N) * K + E * N

    @staticmethod
    def step(query_len: int, past: int) -> bool:
        """Whether a pass is a recurrent step: one token continuing a cached sequence."""
        return query_len == 1 and past > 0

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        """The conv and the scan, forward (the linears are generic)."""
        E, H, P, N, G, K, Q = self.sizes
        conv_out = query_len + K - 1 if past == 0 else query_len + 1
        conv = 2 * batch * conv_out * K * (E + 2 * G * N)
        if self.step(query_len, past):
            return {"mamba2/conv1d": conv, "mamba2/scan": 2 * batch * E * N}
        c = -(-query_len // Q)
        within = 2 * batch * c * H * Q * Q * (N + P)  # C B^T, then times x*dt
        states = 2 * batch * c * Q * H * P * N * 2  # the chunk states, and their output
        passing = 2 * batch * (c + 1) ** 2 * H * P * N
        return {"mamba2/conv1d": conv, "mamba2/scan": within + states + passing}

    def pass_ops(self, run: RunSpec) -> list[Op]:
        """Forward elementwise ops of a pass (costs: docs/conventions.md)."""
        E, H, P, N, G, K, Q = self.sizes
        B, S, past = run.batch, run.query_len, run.seq - run.query_len
        T, conv = B * S, E + 2 * G * N
        out = [Op("mamba2/conv1d", T * conv, SILU_COST + int(self.cfg.mamba2.conv_bias), 2),  # (bias and) SiLU
               Op("mamba2/dt", T * H, 1 + SOFTPLUS_COST, 2),  # + dt_bias, softplus
               Op("mamba2/scan", H, 2, 2)]  # A = -exp(A_log)
        if self.step(S, past):  # exp(dt*A), dt*B, times x, the update a*h + b
            out += [Op("mamba2/scan", T * H * (2 + N), 1, 2), Op("mamba2/scan", T * E * N, 3, 3)]
        else:
            c = -(-S // Q)
            Tp = B * c * Q  # padded positions
            out += [Op("mamba2/scan", T * (E + H), 1, 3),  # x*dt, dt*A
                    Op("mamba2/scan", Tp * H, 4, 2),  # cumsum, the chunk's decay (sub, exp), exp(cumsum)
                    Op("mamba2/scan", B * c * H * Q * Q, 4, 2),  # segsum (cumsum, difference), exp, G * L
                    Op("mamba2/scan", Tp * H * N, 1, 3),  # B * decay
                    Op("mamba2/scan", B * H * (c + 1) * (c + 1 + 2), 2, 2),  # the chunk decays' segsum, exp
                    Op("mamba2/scan", Tp * E, 2, 3)]  # y_off * exp(cumsum), y_diag + y_off
        out.append(Op("mamba2/output", T * E, 2, 3))  # y + x*D
        if self.cfg.mamba2.norm:
            return out + [Op("mamba2/norm", T * E, GATED_NORM_COST, 3)]
        return out + [Op("mamba2/output", T * E, SILU_COST + 1, 3)]  # y * silu(z)

    def saves(self, tape: Tape, B: int, S: int, x: str) -> None:
        """What the reference mixer (:mod:`analysis.verify.mamba2`) keeps for backward over ``B x S`` tokens
        (a training pass: the chunked scan), in its forward order: in_proj its input; the conv its input (a
        view of in_proj's output, whose whole storage counts: z, x, B, C, dt); at the mixer SiLU's input,
        softplus's input and exp(A_log); in the scan x (a view of SiLU's output) and dt, A, the causal
        masks (one byte per entry), and per chunk and head: the decays L, C and B, C B^T, its product with
        L, x*dt, the chunk's decay, B times it, the chunk decays and the chunk states passed, the states
        at each chunk's start, the states' output and exp(cumsum); the gated norm y, silu(z), their
        product, one rsqrt per group and the normed output (without the norm, at the mixer, y and silu(z));
        out_proj its input."""
        E, H, P, N, G, K, Q = self.sizes
        T, b, d = B * S, tape.b, self.cfg.d_model
        c = -(-S // Q)
        Bq, Cd = B * c * H, E + 2 * G * N  # chunk-heads, conv channels
        tape.linear("mamba2/in_proj", T * d * b, T, x)
        tape.save("mamba2/conv1d", T * (Cd + E + H) * b, "in_proj output")
        tape.save("mamba2", T * Cd * b + T * H * b + H * b)  # SiLU's and softplus's inputs, exp(A_log)
        tape.save("mamba2/scan", T * Cd * b, "SiLU output")  # x, and B and C
        tape.save("mamba2/scan", T * H * b + H * b + Q * Q)  # dt, A, the within-chunk mask
        tape.save("mamba2/scan", Bq * (3 * Q * Q + 3 * Q * N + 2 * Q * P + 2 * Q + N * P) * b)
        tape.save("mamba2/scan", (c + 1) ** 2 + B * H * (c + 1) * (c + 1 + N * P) * b)  # chunk mask, decays, states
        if self.cfg.mamba2.norm:
            tape.save("mamba2/norm", (4 * T * E + T * G) * b)
        else:
            tape.save("mamba2", 2 * T * E * b)
        tape.linear("mamba2/out_proj", T * E * b, T)
