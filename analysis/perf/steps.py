"""Sums over the passes of a generation or a chunked prefill, in closed form (DESIGN.md section 6:
constant time in the new tokens and in the chunks; the expected sums' pieces at each doubling of the context
make it grow as the logarithm).

Each component's FLOPs and bytes in a pass are integer polynomials of degree at most 2 in the pass's position
(the context of a decode step or of a no-cache recompute; the index of a chunk) between breakpoints the config
fixes: a sliding window W, a recurrent mixer's first pass (no state in), MLA's first pass (absorbed only after
cached tokens) (:func:`thresholds`), the boundaries of a chunked layer's chunks (:func:`chunk_every`), the tokens
from which a no-cache pass reaches one more of its routed experts (:func:`reached_steps`; a decode step's batch
reaches as many at any position), and within a piece on each residue class modulo :func:`period` (int4 packs
two values a byte: ``ceil(T d / 2)`` bytes of embedding rows alternate with the parity of ``T d``; a recurrent
mixer's chunked form runs a partial last chunk of ``s mod chunk`` tokens).
Each piece's (class's) polynomials are interpolated from exact counts at three of its points and summed exactly
(integers, :mod:`.polynomial`); a pass's time, the larger of compute and memory per component, is summed after
splitting each piece where the two cross. A chunked layer's chunks recur (:func:`chunk_every`): between two other
breakpoints their whole periods are summed as blocks (:mod:`.blocks`). The ideal sums equal the pass-by-pass ones
(tests/test_time.py keeps that loop as the reference); the expected ones take each piece's rates (the calibrated
efficiencies, which vary slowly with the pass) at its middle pass, a run of blocks the middle block's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable

from ..count.flops import experts_reached, held_copies
from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.sizes import DTYPE_BITS
from ..spec import RunSpec
from .blocks import Blocks, Repeat, block_counts, blocks_time, layout
from .polynomial import Counts, Rates, Times, classes, piece_sum, polynomials


def thresholds(cfg: ModelConfig) -> set[int]:
    """Positions near which a pass's counts change form: splitting there leaves polynomial pieces (but where a
    pass reaches more routed experts, :func:`reached_steps`, and a chunked layer's chunks begin,
    :func:`chunk_every`)."""
    points = set()
    for _, block in build(cfg).blocks:
        spec = block.spec
        if spec.window is not None:
            points.add(spec.window)
        if spec.topk is not None:  # DSA: each query attends to min(keys, topk) keys
            points.add(spec.topk)
        if block.mixers:  # a first pass runs no state in (a chunked form's chunks: period)
            points.add(0)
        if spec.attention == "mla":  # a one-token pass runs absorbed after cached tokens, not on the first
            points.add(0)
    return points


def chunk_every(cfg: ModelConfig) -> int | None:
    """Every how many positions the chunked layers' chunks begin anew (the chunks' least common multiple), or
    None without chunked layers."""
    chunks = {block.spec.chunk for _, block in build(cfg).blocks if block.spec.chunk is not None}
    return math.lcm(*chunks) if chunks else None


def reached_steps(cfg: ModelConfig, per_position: int, top: int, ep: int = 1) -> set[int]:
    """The positions up to ``top`` from which a pass of ``per_position`` tokens a position (a batch's no-cache
    recompute of its prefix) reaches one more of a layer's routed experts (:func:`~analysis.count.flops
    .experts_reached`, non-decreasing in the tokens; on a GPU of an expert-parallel group of ``ep``, of those it
    holds, which the group's tokens reach): for each count, the first position reaching it, by bisection. Pieces
    start there exactly."""
    out: set[int] = set()
    routed = {(held_copies(m, ep), m.copies, m.active) for m, _ in build(cfg).linears() if m.active != m.copies}
    for held, experts, k in routed:  # (every token to every expert reaches all of them, always)
        reached = functools.partial(_reached, held, experts, k, per_position * ep)
        for n in range(reached(1) + 1, reached(top) + 1):
            lo, hi = 1, top  # reached(lo) < n <= reached(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if reached(mid) < n else (lo, mid)
            out.add(hi)
    return out


def _reached(held: int, experts: int, k: int, per_position: int, position: int) -> int:
    return experts_reached(held, experts, k, per_position * position)


def period(cfg: ModelConfig, run: RunSpec) -> int:
    """The passes' counts are polynomial on each residue class modulo this: a value of ``bits`` bits
    packed ``ceil(n bits / 8)`` bytes a tensor repeats its rounding every ``8 / gcd(bits, 8)`` values,
    and a recurrent mixer's chunked form (a prefill's) its last, partial chunk every ``chunk`` tokens."""
    dtypes = {run.dtype, run.weights_dtype, run.kv_dtype} & DTYPE_BITS.keys()
    chunks = [] if run.mode == "decode" else [m.chunk for _, b in build(cfg).blocks for m in b.mixers if m.chunk]
    return math.lcm(*(8 // math.gcd(DTYPE_BITS[d], 8) for d in dtypes), *chunks)


def splits(points: Iterable[int]) -> set[int]:
    """Where pieces start: each point and its neighbours."""
    return {p + k for p in points for k in (-1, 0, 1)}


def count_sum(f: Callable[[int], Counts], lo: int, hi: int, starts: set[int], step: int = 1,
              repeat: Repeat | None = None) -> Counts:
    """sum_{x=lo..hi} f(x), component by component, f polynomial on each residue class modulo ``step``
    of each piece; the components in the order they first appear."""
    total: dict[str, list[int]] = {}
    for item in layout(lo, hi, starts, repeat, step):
        if isinstance(item, Blocks):
            block_counts(f, item, step, total)
        else:
            piece_sum(f, *item, step, total)
    return {k: (v[0], v[1], v[2]) for k, v in total.items()}


# a piece of at most SHORT passes is summed pass by pass, each at its own rates: the middle pass of a few
# tokens' passes stands for them worst (a pass of 2 tokens has two thirds of the GEMM rows of one of 3)
SHORT = 4


def time_sum(f: Callable[[int], Counts], rates: Callable[[int], Callable[[str], Rates]], lo: int, hi: int,
             starts: set[int], step: int = 1, repeat: Repeat | None = None) -> float:
    """sum_{x=lo..hi} of a pass's time, the sum over components of max(compute, memory), f polynomial
    on each residue class modulo ``step`` of each piece; ``rates(x)(key)``: a component's rates on the
    piece whose middle pass is x (on blocks of ``repeat``, the middle block's)."""
    times = Times()
    for item in layout(lo, hi, starts, repeat, step, SHORT):
        if isinstance(item, Blocks):
            blocks_time(times, f, rates, item, step)
            continue
        a, b = item
        rate = rates((a + b) // 2)
        for first, n in classes(a, b, step):
            for key, (mm, ew, nbytes) in polynomials([f(first + step * t) for t in range(min(n, 3))]).items():
                times.add(rate(key), mm, ew, nbytes, n)
    return times.seconds
