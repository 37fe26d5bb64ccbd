"""Sums over the passes of a generation or a chunked prefill, in closed form (DESIGN.md section 6:
constant time in the new tokens and in the chunks).

Each component's FLOPs and bytes in a pass are integer polynomials of degree at most 2 in the pass's position
(the context of a decode step or of a no-cache recompute; the index of a chunk) between breakpoints the config
fixes: a sliding window W, the boundaries of a chunked layer's chunks, a recurrent mixer's first pass (no state
in), MLA's first pass (absorbed only after cached tokens) (:func:`thresholds`), the tokens from which a pass
reaches one more of its routed experts (:func:`reached_steps`), and within a piece on each residue class
modulo :func:`period` (int4 packs two values a byte: ``ceil(T d / 2)`` bytes of embedding rows alternate with
the parity of ``T d``; a recurrent mixer's chunked form runs a partial last chunk of ``s mod chunk`` tokens).
Each piece's (class's) polynomials are interpolated from exact counts at three of its points and summed exactly
(integers); a pass's time, the larger of compute and memory per component, is summed after splitting each
piece where the two cross. The ideal sums equal the pass-by-pass ones (tests/test_time.py keeps that loop as
the reference); the expected ones take each piece's rates (the calibrated efficiencies, which vary slowly with
the pass) at its middle pass.
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

Counts = dict[str, tuple[int, int, int]]  # component -> (matmul FLOPs, elementwise FLOPs, bytes)
Rates = tuple[float, float, float]  # matmul FLOP/s, elementwise FLOP/s, bytes/s
ZERO = (0, 0, 0)


def thresholds(cfg: ModelConfig, top: int) -> set[int]:
    """Positions up to ``top`` near which a pass's counts change form: splitting there leaves
    polynomial pieces (but where a pass reaches more routed experts: :func:`reached_steps`)."""
    points = set()
    for _, block in build(cfg).blocks:
        spec = block.spec
        if spec.window is not None:
            points.add(spec.window)
        if spec.topk is not None:  # DSA: each query attends to min(keys, topk) keys
            points.add(spec.topk)
        if spec.chunk is not None:
            points.update(range(0, top + spec.chunk, spec.chunk))
        if block.mixers:  # a first pass runs no state in (a chunked form's chunks: period)
            points.add(0)
        if spec.attention == "mla":  # a one-token pass runs absorbed after cached tokens, not on the first
            points.add(0)
    return points


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


def pieces(lo: int, hi: int, starts: set[int]) -> list[tuple[int, int]]:
    bounds = [lo, *sorted(s for s in starts if lo < s <= hi), hi + 1]
    return [(a, b - 1) for a, b in zip(bounds, bounds[1:])]


class Newton:
    """An integer polynomial of degree at most 2 on ``0..n-1`` from its values at 0, 1, 2 (fewer
    points: a lower degree): ``p(k) = y + d1 k + d2 k (k - 1) / 2``, integer arithmetic throughout."""

    def __init__(self, ys: list[int]) -> None:
        self.y = ys[0]
        self.d1 = ys[1] - ys[0] if len(ys) > 1 else 0
        self.d2 = ys[2] - 2 * ys[1] + ys[0] if len(ys) > 2 else 0

    def at(self, k: int) -> int:
        return self.y + self.d1 * k + self.d2 * k * (k - 1) // 2

    def prefix(self, n: int) -> int:
        """sum_{k<n} p(k)."""
        return n * self.y + self.d1 * (n * (n - 1) // 2) + self.d2 * (n * (n - 1) * (n - 2) // 6)

    def power(self) -> tuple[float, float, float]:
        """Float coefficients of 1, k, k^2 (to find where two polynomials cross)."""
        return self.y, self.d1 - self.d2 / 2, self.d2 / 2


def _roots(c: float, b: float, a: float) -> list[float]:
    """Real roots of a + b x + c x^2 = 0 with the constant first (floats: only where to split,
    each side then checked exactly)."""
    if a == 0:
        return [-c / b] if b else []
    disc = b * b - 4 * a * c
    if disc < 0:
        return []
    q = -(b + math.copysign(math.sqrt(disc), b)) / 2  # the stable form: no cancellation
    return [q / a, c / q] if q else [-b / (2 * a)]


def _classes(a: int, b: int, step: int) -> list[tuple[int, int]]:
    """The passes ``a..b`` by residue class modulo ``step``: (the first, how many) of each."""
    return [(a + r, (b - a - r) // step + 1) for r in range(min(step, b - a + 1))]


def count_sum(f: Callable[[int], Counts], lo: int, hi: int, starts: set[int], step: int = 1) -> Counts:
    """sum_{x=lo..hi} f(x), component by component, f polynomial on each residue class modulo ``step``
    of each piece; the components in the order they first appear."""
    total: dict[str, list[int]] = {}
    for a, b in pieces(lo, hi, starts):
        for first, n in _classes(a, b, step):
            counts = [f(first + step * t) for t in range(min(n, 3))]
            for key in dict.fromkeys(k for c in counts for k in c):
                acc = total.setdefault(key, [0, 0, 0])
                for i in range(3):
                    acc[i] += Newton([c.get(key, ZERO)[i] for c in counts]).prefix(n)
    return {k: (v[0], v[1], v[2]) for k, v in total.items()}


class _Times:
    """The integer sums behind a sum of pass times, by rates: a component's FLOPs where its compute
    time is the larger, its bytes where its memory time is."""

    def __init__(self) -> None:
        self.sums: dict[Rates, list[int]] = {}

    def add(self, rates: Rates, mm: Newton, ew: Newton, nbytes: Newton, n: int) -> None:
        """The passes k = 0..n-1 of one component whose counts are these polynomials in k."""
        P, V, B = rates
        acc = self.sums.setdefault(rates, [0, 0, 0])
        power = [m / P + e / V - b / B for m, e, b in zip(mm.power(), ew.power(), nbytes.power())]
        cuts = {math.floor(r) + k for r in _roots(*power) if -2 < r < n + 2 for k in (-1, 0, 1, 2)}
        for a, b in pieces(0, n - 1, cuts):
            # no crossing strictly inside: the larger roof at an end or the middle is the piece's,
            # compared as the pass's own Component compares them
            diffs = [mm.at(k) / P + ew.at(k) / V - nbytes.at(k) / B for k in (a, b, (a + b) // 2)]
            if next((d for d in diffs if d), 0) >= 0:
                acc[0] += mm.prefix(b + 1) - mm.prefix(a)
                acc[1] += ew.prefix(b + 1) - ew.prefix(a)
            else:
                acc[2] += nbytes.prefix(b + 1) - nbytes.prefix(a)

    @property
    def seconds(self) -> float:
        return sum(m / P + e / V + b / B for (P, V, B), (m, e, b) in self.sums.items())


# a piece of at most SHORT passes is summed pass by pass, each at its own rates: the middle pass of a few
# tokens' passes stands for them worst (a pass of 2 tokens has two thirds of the GEMM rows of one of 3)
SHORT = 4


def time_sum(f: Callable[[int], Counts], rates: Callable[[int], Callable[[str], Rates]], lo: int, hi: int,
             starts: set[int], step: int = 1) -> float:
    """sum_{x=lo..hi} of a pass's time, the sum over components of max(compute, memory), f polynomial
    on each residue class modulo ``step`` of each piece; ``rates(x)(key)``: a component's rates on the
    piece whose middle pass is x."""
    times = _Times()
    short = {x for a, b in pieces(lo, hi, starts) if b - a + 1 <= SHORT for x in range(a, b + 1)}
    for a, b in pieces(lo, hi, starts | short):
        rate = rates((a + b) // 2)
        for first, n in _classes(a, b, step):
            counts = [f(first + step * t) for t in range(min(n, 3))]
            for key in dict.fromkeys(k for c in counts for k in c):
                mm, ew, nbytes = (Newton([c.get(key, ZERO)[i] for c in counts]) for i in range(3))
                times.add(rate(key), mm, ew, nbytes, n)
    return times.seconds
