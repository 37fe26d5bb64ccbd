"""Hyper-connections (``hyper``): ``N`` residual streams per token in place of one (DeepSeek V4's
manifold-constrained hyper-connections, Hy4's independent ones). Imported when a config has the key
(:func:`.keys.nested`).

The embeddings are copied into the N streams. Before each branch (attention, FFN) of a layer its
hyper-connection ``hyper/<branch>`` reads the streams ``X`` (N x d per token): a weightless RMS norm
over their ``N*d`` values, one linear of them (``fn``, ``N*d -> R``) whose outputs, scaled (``scale``)
and shifted (``base``), give the weights ``pre`` (N, a sigmoid), ``post`` (N, a sigmoid) and, with
``mix`` (DeepSeek V4), ``comb`` (N x N, a softmax made doubly stochastic by ``sinkhorn_iters``
Sinkhorn iterations): ``R = (2 + N) * N`` with ``mix``, ``2 * N`` without. The branch reads
``sum_i pre_i X_i`` through its norm, and its output ``y`` returns as ``post_i * y + (comb^T X)_i``
with ``mix`` (a batched N x N by N x d matmul per token), ``post_i * y + X_i`` without
(``hyper/<branch>_mix``).
After the last layer ``hyper/head`` (``fn``: ``N*d -> N``, ``base`` N, one ``scale``) collapses the
streams the same way, before the final norm.

Saved for backward (the reference's fused coefficients, as DeepSeek's kernels compute them): the
coefficient function keeps the streams (shared with what else reads them), the fp32 statistic of
its norm and its ``R`` outputs before the activations, and recomputes the rest in backward (the
activations, Sinkhorn's iterations: elementwise only); the collapse keeps ``pre``; the expansion
keeps ``post`` and the branch output; the mix keeps ``comb``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .keys import boolean, checked, integer
from .parts import Vector
from .tape import STAT, Tape
from .variants import SOFTMAX_COST, Op, norm_cost

if TYPE_CHECKING:
    from .config import ModelConfig

SIGMOID_COST = 3  # exp, add, divide (as ffn.SIGMOID_COST; ffn imports nothing of this module)


@dataclass(frozen=True)
class HyperConfig:
    """Hyper-connections: ``streams`` residual streams (``hc_mult``), mixed through a doubly stochastic
    matrix (``mix``, DeepSeek V4's mHC) or not (Hy4's independent ones)."""

    streams: int = checked(integer())
    mix: bool = checked(boolean, True)
    sinkhorn_iters: int = checked(integer(), 20)  # mix: Sinkhorn-Knopp iterations (elementwise FLOPs)


def _streams(cfg: ModelConfig) -> HyperConfig:
    assert cfg.hyper is not None, "no hyper mapping"
    return cfg.hyper


def rows(cfg: ModelConfig) -> int:
    """R, the outputs of a branch's coefficient linear: pre and post (N each) and, with mix, comb (N x N)."""
    h = _streams(cfg)
    return (2 + h.streams) * h.streams if h.mix else 2 * h.streams


def branch_vector(cfg: ModelConfig, branch: str) -> Vector:
    """``hyper/<branch>``: its linear (``N*d x R``), ``base`` (R) and ``scale`` (3 with mix, else 2)."""
    h, R = _streams(cfg), rows(cfg)
    return Vector(f"hyper/{branch}", R * h.streams * cfg.d_model + R + (3 if h.mix else 2))


def head_vector(cfg: ModelConfig) -> Vector:
    """``hyper/head``: the final collapse's linear (``N*d x N``), ``base`` (N) and one ``scale``."""
    N = _streams(cfg).streams
    return Vector("hyper/head", N * N * cfg.d_model + N + 1)


def branch_matmul(cfg: ModelConfig, tokens: int, branches: tuple[str, ...]) -> dict[str, int]:
    """Forward matmul FLOPs of a layer's hyper-connections over ``tokens``: each branch's linear, and with
    mix the streams' N x N mix after it (``hyper/<branch>_mix``)."""
    h, d = _streams(cfg), cfg.d_model
    N = h.streams
    out = {}
    for b in branches:
        out[f"hyper/{b}"] = 2 * tokens * N * d * rows(cfg)
        if h.mix:
            out[f"hyper/{b}_mix"] = 2 * tokens * N * N * d
    return out


def head_matmul(cfg: ModelConfig, tokens: int) -> int:
    N = _streams(cfg).streams
    return 2 * tokens * N * cfg.d_model * N


def branch_ops(cfg: ModelConfig, tokens: int, branches: tuple[str, ...]) -> list[Op]:
    """A layer's hyper-connection elementwise ops (the residual adds are flops.layer_ops'): per branch the
    weightless norm over N*d, the activations (and Sinkhorn's iterations: a sum and a divide per
    element, twice each), the collapse (a multiply and an add per stream element), the expansion (a
    multiply per stream element)."""
    h, T, d = _streams(cfg), tokens, cfg.d_model
    N = h.streams
    ops: list[Op] = []
    for b in branches:
        key = f"hyper/{b}"
        ops += [Op(key, T * N * d, norm_cost("rmsnorm", False, False), 2),
                Op(key, T * 2 * N, SIGMOID_COST + 2, 2),  # scale, shift, sigmoid
                Op(key, T * N * d, 2, 2),  # collapse: pre_i * X_i summed
                Op(key, T * N * d, 1, 2)]  # expansion: post_i * y
        if h.mix:
            ops += [Op(key, T * N * N, SOFTMAX_COST + 3, 2),  # scale, shift, softmax, + eps
                    Op(key, T * N * N, 4 * h.sinkhorn_iters, 2)]
    return ops


def head_ops(cfg: ModelConfig, tokens: int) -> list[Op]:
    N, d = _streams(cfg).streams, cfg.d_model
    return [Op("hyper/head", tokens * N * d, norm_cost("rmsnorm", False, False), 2),
            Op("hyper/head", tokens * N, SIGMOID_COST + 2, 2), Op("hyper/head", tokens * N * d, 2, 2)]


def coefficient_saves(tape: Tape, key: str, T: int, x: str) -> None:
    """The coefficient function over the streams ``x``: the streams, its norm's fp32 statistic, its R
    outputs; the collapse keeps ``pre`` (N per token)."""
    N, d, b, R = _streams(tape.cfg).streams, tape.cfg.d_model, tape.b, rows(tape.cfg)
    tape.save(key, T * N * d * b, x)
    tape.save(key, T * STAT + T * R * b)
    tape.save(key, T * N * b)


def expansion_saves(tape: Tape, branch: str, T: int, x: str) -> None:
    """After a branch (``hyper/<branch>_mix``): ``post`` and the branch output (the expansion's multiply),
    and with mix ``comb`` and the streams ``x`` (the mix's matmul)."""
    h, d, b, key = _streams(tape.cfg), tape.cfg.d_model, tape.b, f"hyper/{branch}_mix"
    N = h.streams
    tape.save(key, T * N * b + T * d * b)
    if h.mix:
        tape.save(key, T * N * N * b)
        tape.save(key, T * N * d * b, x)


def head_saves(cfg: ModelConfig, T: int, b: int) -> int:
    """The final collapse's saved bytes: the streams, its norm's fp32 statistic, its N outputs and ``pre``."""
    N, d = _streams(cfg).streams, cfg.d_model
    return T * N * d * b + T * STAT + 2 * T * N * b


def branch_bytes(cfg: ModelConfig, tokens: int, branches: tuple[str, ...], b: int) -> dict[str, int]:
    """Bytes a layer's hyper-connection matmuls move (``b`` a value): each branch's linear reads its weights
    and the streams and writes its R outputs; with mix, each mix reads comb and the streams and writes them."""
    h, d, T = _streams(cfg), cfg.d_model, tokens
    N, R = h.streams, rows(cfg)
    out = {}
    for br in branches:
        out[f"hyper/{br}"] = (R * N * d + T * (N * d + R)) * b
        if h.mix:
            out[f"hyper/{br}_mix"] = T * (N * N + 2 * N * d) * b
    return out
