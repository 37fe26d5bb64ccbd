"""The Mamba-1 mixer (``mamba`` layers): one descriptor, everything the analytic families need.

Sizes: ``E = mamba.expand * d_model`` channels, ``N = mamba.d_state``, ``R`` the dt rank
(``mamba.dt_rank``, else ``ceil(d_model / 16)``), ``K = mamba.d_conv`` taps. Parts (breakdown keys):
``mamba/in_proj`` (d -> 2E: x and the gate z), ``mamba/conv1d`` (a depthwise causal conv of K taps
over x: ``E*K`` weights and, with ``conv_bias``, E biases), ``mamba/x_proj`` (E -> R + 2N: dt, B, C),
``mamba/dt_proj`` (R -> E, with bias), ``mamba/A_log`` (E x N), ``mamba/D`` (E), ``mamba/out_proj``
(E -> d); in_proj and out_proj have biases iff ``mamba.proj_bias``. With ``mamba.heads`` H > 1 (Zamba v1's
``n_mamba_heads``) the E channels split into H heads of ``E/H`` after the conv, and x_proj and dt_proj are per
head (H copies of ``E/H -> R + 2N`` and ``R -> E/H``, each head's dt, B and C its own): the same parameters and
matmul FLOPs, but ``H * (R + 2N)`` values per token out of x_proj and ``H * R`` into dt_proj. Falcon-Mamba
(``mamba.mixer_norms: true``) norms dt, B and C by weightless RMS norms; Jamba (``mixer_norms:
weighted``) by RMS norms with a weight each: ``mamba/dt_norm`` (R), ``mamba/b_norm`` and
``mamba/c_norm`` (N each).

The scan is counted in its **recurrent form**, as transformers' slow path (``torch_forward``) and
llmcalc's reference run it: per token ``h = exp(dt*A) * h + dt*B*u`` (elementwise over ``E x N``) and
``y = h @ C`` (a batched matmul per head, ``2*E*N`` FLOPs per token in all), then ``y + D*u`` and ``y * silu(z)``.
The conv is ``nn.Conv1d(padding=K-1)`` over the ``S`` new tokens of a pass that starts the
sequence: ``S + K - 1`` outputs computed, the last ``K - 1`` dropped (FlopCounterMode counts all
``2*B*(S+K-1)*K*E``); a pass that continues a cached sequence (a decode step, a later chunk)
convolves the ``K`` cached inputs and its ``C`` new ones without padding: ``C + 1`` outputs.

The cache (the layer's **state**, per sequence, constant in sequence length): the last ``K``
inputs of the conv and the SSM state, ``E*(K + N)`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import brief
from .keys import Checker, boolean, checked, integer, optional
from .mixer import Mixer
from .parts import Linear, Norm, Vector, conv_vector
from .tape import Tape
from .variants import Op

if TYPE_CHECKING:
    from ..spec import RunSpec

SILU_COST = 4  # x * sigmoid(x): exp, add, divide, multiply
SOFTPLUS_COST = 3  # log(1 + exp(x))
RMS_COST = 3  # weightless RMS norm: square-mean, rsqrt, scale


MIXER_NORMS = (False, True, "weighted")  # mamba.mixer_norms' values


def _mixer_norms(c: Checker, key: str, value: Any) -> bool | str:
    """``mamba.mixer_norms``: true or false, or ``weighted``."""
    if not any(value == v and type(value) is type(v) for v in MIXER_NORMS):
        c.fail(key, f"must be true, false or weighted, got {brief(value)}")
    return value


@dataclass(frozen=True)
class MambaConfig:
    """The Mamba-1 selective-state-space mixer of ``mamba`` layers (transformers' MambaMixer): in_proj
    d -> 2E (E = expand * d_model), a depthwise causal conv1d of d_conv taps, x_proj E -> dt_rank + 2
    d_state, dt_proj dt_rank -> E (with bias), A_log (E x d_state), D (E), out_proj E -> d; SiLU."""

    d_state: int = checked(integer(), 16)  # N: the SSM state per channel
    d_conv: int = checked(integer(), 4)  # K: the depthwise convolution's taps
    expand: int = checked(integer(), 2)  # E = expand * d_model
    dt_rank: int | None = checked(optional(integer()), None)  # None: ceil(d_model / 16)
    conv_bias: bool = checked(boolean, True)
    proj_bias: bool = checked(boolean, False)  # biases of in_proj and out_proj
    # RMS norms on dt, B and C: true, weightless (Falcon-Mamba); "weighted", a weight each (Jamba)
    mixer_norms: bool | str = checked(_mixer_norms, False)
    heads: int = checked(integer(), 1)  # H: x_proj and dt_proj per head of E/H channels (Zamba v1)


class Mamba(Mixer):
    """The Mamba-1 mixer of a layer (module docstring)."""

    core = ("mamba/scan", "mamba/conv1d", "mamba/A_log")  # the conv, the scan and A = -exp(A_log): one kernel

    @property
    def core_io(self) -> tuple[int, int]:
        """The conv's input x and dt (E each) and each head's B and C (2N) in; y (E) out."""
        E, N, _, _ = self.sizes
        return 2 * E + 2 * N * self.cfg.mamba.heads, E

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """(E, N, R, K)."""
        c = self.cfg
        assert c.mamba is not None, "a mamba layer without its mapping"
        return c.mamba_width, c.mamba.d_state, c.dt_rank, c.mamba.d_conv

    def linears(self) -> list[Linear]:
        """in_proj, x_proj and dt_proj (one copy per head, every copy used by every token), out_proj."""
        c, (E, N, R, _) = self.cfg, self.sizes
        bias, H = c.mamba.proj_bias, c.mamba.heads
        return [Linear("mamba/in_proj", c.d_model, 2 * E, bias),
                Linear("mamba/x_proj", E // H, R + 2 * N, False, H, H), Linear("mamba/dt_proj", R, E // H, True, H, H),
                Linear("mamba/out_proj", E, c.d_model, bias)]

    def norms(self) -> list[Norm]:
        return []  # the weightless mixer norms hold nothing (their FLOPs: ops)

    def vectors(self) -> list[Vector]:
        E, N, R, K = self.sizes
        weights = [Vector("mamba/dt_norm", R), Vector("mamba/b_norm", N), Vector("mamba/c_norm", N)]
        return [conv_vector("mamba/conv1d", E, K, self.cfg.mamba.conv_bias),
                Vector("mamba/A_log", E * N, ((E, N),)), Vector("mamba/D", E)] + (weights if self.weighted else [])

    @property
    def weighted(self) -> bool:
        """The mixer norms have weights (Jamba's ``mixer_norms: weighted``)."""
        return self.cfg.mamba.mixer_norms == "weighted"

    @property
    def state_values(self) -> int:
        """Values the layer's state holds per sequence: K conv inputs and N SSM values per channel."""
        E, N, _, K = self.sizes
        return E * (K + N)

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        """The conv and the scan's ``h @ C``, forward (the linears are generic)."""
        E, N, _, K = self.sizes
        T = batch * query_len
        return {"mamba/conv1d": 2 * batch * self.conv_outputs(query_len, past, K) * K * E,
                "mamba/scan": 2 * T * E * N}

    def pass_ops(self, run: RunSpec) -> list[Op]:
        """Forward elementwise ops of a pass (costs: docs/conventions.md)."""
        E, N, R, _ = self.sizes
        T = run.tokens
        m = self.cfg.mamba
        out = [Op("mamba/conv1d", T * E, SILU_COST + int(m.conv_bias), 2),  # (bias and) SiLU
               Op("mamba/dt", T * E, SOFTPLUS_COST, 2),
               # A = -exp(A_log) once; per token and state element exp(dt*A), dt*B*u, the update a*h + b
               Op("mamba/scan", E * N, 2, 2), Op("mamba/scan", T * E * N, 6, 3),
               Op("mamba/output", T * E, 2 + SILU_COST + 1, 3)]  # y + D*u, times silu(z)
        if m.mixer_norms:  # weighted: one multiply more per element
            out.append(Op("mamba/norms", T * (R + 2 * N), RMS_COST + int(self.weighted), 2))
        return out

    def saves(self, tape: Tape, B: int, S: int, x: str) -> None:
        """What the reference mixer (:mod:`analysis.verify.mamba`) keeps for backward over ``B x S`` tokens,
        in its forward order: in_proj its input; the conv its input (a view of in_proj's output, whose
        whole storage counts: u and z); at the mixer, SiLU's input (the conv output laid out by token),
        softplus's input, exp(A_log) and A, dt, exp(dt*A), dt*u, silu(z) and y + u*D; x_proj u; dt_proj
        its input (a view of x_proj's output, each head's, or the normed dt); the scan dt*B*u (h_1) and the states
        h_2..h_S; out_proj its input. Falcon-Mamba's weightless norms keep x_proj's output and one rsqrt
        per row each, and the normed B (at the mixer) and C (in the scan). Jamba's weighted norms keep, besides,
        each norm's output before its weight (the weight's gradient): ``T * (R + 2N)`` values."""
        E, N, R, _ = self.sizes
        T, b, H = B * S, tape.b, self.cfg.mamba.heads
        norms = self.cfg.mamba.mixer_norms  # only with one head (analysis.model.rules)
        tape.linear("mamba/in_proj", T * self.cfg.d_model * b, T, x)
        tape.save("mamba/conv1d", 2 * T * E * b, "in_proj output")
        tape.save("mamba", T * E * b)  # SiLU's input
        tape.linear("mamba/x_proj", T * E * b, T, "u")
        if norms:  # pow keeps x_proj's output (dt, B, C are views of it), rsqrt its output per row
            tape.save("mamba", T * (R + 2 * N) * b + 3 * T * b, "x_proj output")
            if self.weighted:  # rms(x) * weight keeps rms(x)
                tape.save("mamba", T * (R + 2 * N) * b)
        tape.linear("mamba/dt_proj", (T * R if norms else T * H * (R + 2 * N)) * b, T * H,
                    None if norms else "x_proj output")
        tape.save("mamba", T * E * b)  # softplus's input
        tape.save("mamba", 2 * E * N * b)  # exp(A_log) and A = -exp(A_log)
        tape.save("mamba", T * E * b)  # dt
        tape.save("mamba", T * E * N * b)  # exp(dt * A)
        tape.save("mamba", T * E * b, "u")
        tape.save("mamba", T * E * b)  # dt * u
        if norms:
            tape.save("mamba", T * N * b)  # the normed B
        tape.save("mamba/scan", T * E * N * b + B * (S - 1) * E * N * b)  # dt*B*u (h_1 is a view), h_2..h_S
        if norms:
            tape.save("mamba/scan", T * N * b)  # the normed C
        tape.save("mamba", 2 * T * E * b)  # silu(z) and y + u*D
        tape.linear("mamba/out_proj", T * E * b, T)
