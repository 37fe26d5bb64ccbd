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
piece where the two cross. A chunked layer's chunk boundaries repeat (:class:`Repeat`): between two other
breakpoints, blocks of whole chunks split alike, and a pass's counts are of degree at most 2 in its position and
its chunk's index together, so a block's sums are polynomials of degree at most 2 in the block's index, summed
over the blocks from three of them; its times likewise where a component keeps one roof over every block (else
block by block). The ideal sums equal the pass-by-pass ones (tests/test_time.py keeps that loop as
the reference); the expected ones take each piece's rates (the calibrated efficiencies, which vary slowly with
the pass) at its middle pass.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import NamedTuple

from ..count.flops import experts_reached, held_copies
from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.sizes import DTYPE_BITS
from ..spec import RunSpec

Counts = dict[str, tuple[int, int, int]]  # component -> (matmul FLOPs, elementwise FLOPs, bytes)
Rates = tuple[float, float, float]  # matmul FLOP/s, elementwise FLOP/s, bytes/s
ZERO = (0, 0, 0)


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


class Repeat(NamedTuple):
    """Breakpoints that recur: ``k every + o`` for every integer ``k`` and each ``o`` of ``offsets``."""

    every: int
    offsets: frozenset[int]

    def within(self, lo: int, hi: int) -> set[int]:
        ks = range((lo - max(self.offsets)) // self.every - 1, (hi - min(self.offsets)) // self.every + 2)
        return {x for k in ks for o in self.offsets if lo <= (x := k * self.every + o) <= hi}


class Blocks(NamedTuple):
    """``repeats`` blocks of ``length`` passes from ``first``, each split into the same pieces (``parts``:
    offsets in a block)."""

    first: int
    length: int
    repeats: int
    parts: list[tuple[int, int]]

    def start(self, j: int) -> int:
        return self.first + j * self.length


# fewer blocks than this in a stretch are summed piece by piece: a closed form needs three
MIN_BLOCKS = 4


def layout(lo: int, hi: int, starts: set[int], repeat: Repeat | None, step: int,
           short: int = 0) -> list[tuple[int, int] | Blocks]:
    """The passes ``lo..hi`` as pieces (split at ``starts`` and ``repeat``'s breakpoints) and, where a stretch
    between two of ``starts`` holds at least MIN_BLOCKS periods of ``repeat`` (a multiple of ``step``), the
    whole periods as Blocks from the first breakpoint. Pieces of at most ``short`` passes are split pass by
    pass."""
    out: list[tuple[int, int] | Blocks] = []
    for a, b in pieces(lo, hi, starts):
        within = repeat.within(a, b) if repeat else set()
        length = math.lcm(repeat.every, step) if repeat else 0
        first = min(within, default=a)
        count = (b + 1 - first) // length if length else 0
        if count < MIN_BLOCKS:
            out += _short(pieces(a, b, within), short)
            continue
        end = first + count * length
        out += _short(pieces(a, first - 1, within), short) if first > a else []
        parts = _short(pieces(first, first + length - 1, within), short)
        out.append(Blocks(first, length, count, [(x - first, y - first) for x, y in parts]))
        out += _short(pieces(end, b, within), short) if end <= b else []
    return out


def _short(parts: list[tuple[int, int]], short: int) -> list[tuple[int, int]]:
    return [q for a, b in parts for q in ([(x, x) for x in range(a, b + 1)] if b - a + 1 <= short else [(a, b)])]


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


def _piece_sum(f: Callable[[int], Counts], a: int, b: int, step: int, total: dict[str, list[int]]) -> None:
    """Add sum_{x=a..b} f(x) to ``total``, f polynomial on each residue class modulo ``step``."""
    for first, n in _classes(a, b, step):
        counts = [f(first + step * t) for t in range(min(n, 3))]
        for key in dict.fromkeys(k for c in counts for k in c):
            acc = total.setdefault(key, [0, 0, 0])
            for i in range(3):
                acc[i] += Newton([c.get(key, ZERO)[i] for c in counts]).prefix(n)


def count_sum(f: Callable[[int], Counts], lo: int, hi: int, starts: set[int], step: int = 1,
              repeat: Repeat | None = None) -> Counts:
    """sum_{x=lo..hi} f(x), component by component, f polynomial on each residue class modulo ``step``
    of each piece; the components in the order they first appear."""
    total: dict[str, list[int]] = {}
    for item in layout(lo, hi, starts, repeat, step):
        if isinstance(item, Blocks):  # each block's sums, a polynomial in its index
            sums: list[dict[str, list[int]]] = [{} for _ in range(3)]
            for j, block in enumerate(sums):
                for a, b in item.parts:
                    _piece_sum(f, item.start(j) + a, item.start(j) + b, step, block)
            for key in dict.fromkeys(k for block in sums for k in block):
                acc = total.setdefault(key, [0, 0, 0])
                for i in range(3):
                    acc[i] += Newton([block.get(key, [0, 0, 0])[i] for block in sums]).prefix(item.repeats)
        else:
            _piece_sum(f, *item, step, total)
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
             starts: set[int], step: int = 1, repeat: Repeat | None = None) -> float:
    """sum_{x=lo..hi} of a pass's time, the sum over components of max(compute, memory), f polynomial
    on each residue class modulo ``step`` of each piece; ``rates(x)(key)``: a component's rates on the
    piece whose middle pass is x (on blocks of ``repeat``, the middle block's)."""
    times = _Times()
    for item in layout(lo, hi, starts, repeat, step, SHORT):
        if isinstance(item, Blocks):
            _blocks_time(times, f, rates, item, step)
            continue
        a, b = item
        rate = rates((a + b) // 2)
        for first, n in _classes(a, b, step):
            counts = [f(first + step * t) for t in range(min(n, 3))]
            for key in dict.fromkeys(k for c in counts for k in c):
                mm, ew, nbytes = (Newton([c.get(key, ZERO)[i] for c in counts]) for i in range(3))
                times.add(rate(key), mm, ew, nbytes, n)
    return times.seconds


def _blocks_time(times: _Times, f: Callable[[int], Counts], rates: Callable[[int], Callable[[str], Rates]],
                 blocks: Blocks, step: int) -> None:
    """A component's passes on one part's residue class over every block: in closed form over each run of
    blocks that one roof bounds (halving a run where the roofs cross), block by block at the crossing."""
    middle = blocks.start(blocks.repeats // 2)
    for a, b in blocks.parts:
        rate = rates(middle + (a + b) // 2)
        for first, n in _classes(a, b, step):
            def row(j: int, first: int = first, n: int = n) -> list[Counts]:  # a class's first passes in block j
                return [f(blocks.start(j) + first + step * t) for t in range(min(n, 3))]

            grid = [row(j) for j in range(3)]
            for key in dict.fromkeys(k for counts in grid for c in counts for k in c):
                polys = [[Newton([c.get(key, ZERO)[i] for c in counts]) for i in range(3)] for counts in grid]
                r = rate(key)
                surface = _Difference(polys, r)
                sums = [Newton([p[i].prefix(n) for p in polys]) for i in range(3)]  # over a block, in its index
                acc = times.sums.setdefault(r, [0, 0, 0])
                todo = [(0, blocks.repeats - 1)]
                while todo:
                    j0, j1 = todo.pop()
                    roof = surface.roof(j0, j1, n)
                    if roof is not None:
                        for i in roof:
                            acc[i] += sums[i].prefix(j1 + 1) - sums[i].prefix(j0)
                    elif j1 - j0 < MIN_BLOCKS:
                        for j in range(j0, j1 + 1):
                            counts = row(j)
                            mm, ew, nbytes = (Newton([c.get(key, ZERO)[i] for c in counts]) for i in range(3))
                            times.add(r, mm, ew, nbytes, n)
                    else:
                        mid = (j0 + j1) // 2
                        todo += [(j0, mid), (mid + 1, j1)]


class _Difference:
    """A component's compute time less its memory time on pass t of block j: a polynomial of degree at most 2 in
    (j, t) together, from its (matmul, elementwise, bytes) polynomials in t on blocks 0, 1 and 2."""

    def __init__(self, polys: list[list[Newton]], rates: Rates) -> None:
        P, V, B = rates
        # by_j[i]: the coefficients of t^i, each a quadratic in j through blocks 0, 1, 2 (its coefficients of 1, j,
        # j^2)
        self.by_j = []
        for i in range(3):
            v = [mm.power()[i] / P + ew.power()[i] / V - nb.power()[i] / B for mm, ew, nb in polys]
            self.by_j.append((v[0], v[1] - v[0] - (v[2] - 2 * v[1] + v[0]) / 2, (v[2] - 2 * v[1] + v[0]) / 2))

    def at(self, j: float, t: float) -> float:
        return sum((e0 + e1 * j + e2 * j * j) * t ** i for i, (e0, e1, e2) in enumerate(self.by_j))

    def roof(self, j0: int, j1: int, n: int) -> tuple[int, ...] | None:
        """Which sums bound every pass ``t < n`` of blocks ``j0..j1`` ((0, 1): the FLOPs', (2,): the bytes'), or
        None where the roofs cross: the difference's extremes on the rectangle are at a corner, an edge's vertex
        or its stationary point."""
        by_j = self.by_j

        def vertex(c1: float, c2: float, lo: int, hi: int) -> list[float]:
            return [-c1 / (2 * c2)] if c2 and lo < -c1 / (2 * c2) < hi else []

        points: list[tuple[float, float]] = [(j, t) for j in (j0, j1) for t in (0, n - 1)]
        for j in (j0, j1):
            c1, c2 = (sum(e * j ** a for a, e in enumerate(by_j[i])) for i in (1, 2))
            points += [(j, t) for t in vertex(c1, c2, 0, n - 1)]
        for t in (0, n - 1):
            c1, c2 = (sum(by_j[i][a] * t ** i for i in range(3)) for a in (1, 2))
            points += [(j, t) for j in vertex(c1, c2, j0, j1)]
        (_, b, dd), (c, e, _), (f, _, _) = by_j  # the difference is .. + b j + dd j^2 + c t + e j t + f t^2
        det = 4 * dd * f - e * e
        if det:
            stationary = (e * c - 2 * f * b) / det, (e * b - 2 * dd * c) / det
            points += [stationary] if j0 < stationary[0] < j1 and 0 < stationary[1] < n - 1 else []
        values = [self.at(*point) for point in points]
        if all(v >= 0 for v in values):
            return (0, 1)
        if all(v <= 0 for v in values):
            return (2,)
        return None
