"""Runs of passes that repeat: a chunked layer's chunks begin every C positions, each split alike at its
boundaries (:class:`Repeat`), so between two other breakpoints whole periods are blocks (:class:`Blocks`). A pass's
counts are of degree at most 2 in its position and its chunk's index together (a chunked layer attends to the keys
of its chunk: the position less C times the chunk's index), so over a block's pass t of block j they are a
polynomial of degree at most 2 in (j, t), and a block's sums one in j: summed over every block from three of them.
A component's time is summed so over each rectangle of blocks and passes that one roof bounds
(:meth:`Surface.roof`); where the roofs cross, the passes are split where they cross on the rectangle's first and
last blocks and the blocks halved, block by block only at a crossing a few blocks long."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

from .polynomial import Counts, Newton, Rates, Times, classes, piece_sum, pieces, polynomials, roots


class Repeat(NamedTuple):
    """Breakpoints that recur: ``k every + o`` for every integer ``k`` and each ``o`` of ``offsets``."""

    every: int
    offsets: frozenset[int]

    def within(self, lo: int, hi: int) -> set[int]:
        """The breakpoints in ``lo..hi`` (a range a few periods long: one set element a breakpoint)."""
        ks = range((lo - max(self.offsets)) // self.every - 1, (hi - min(self.offsets)) // self.every + 2)
        return {x for k in ks for o in self.offsets if lo <= (x := k * self.every + o) <= hi}

    def first(self, lo: int) -> int:
        """The first breakpoint at or after ``lo``."""
        return min(-((o - lo) // self.every) * self.every + o for o in self.offsets)


class Blocks(NamedTuple):
    """``repeats`` blocks of ``length`` passes from ``first``, each split into the same pieces (``parts``:
    offsets in a block)."""

    first: int
    length: int
    repeats: int
    parts: list[tuple[int, int]]

    def start(self, j: int) -> int:
        return self.first + j * self.length


# a stretch of fewer whole periods is summed piece by piece (three blocks give the closed form; a fourth
# leaves one to sum by it), and a crossing of the roofs this few blocks long block by block
MIN_BLOCKS = 4


def layout(lo: int, hi: int, starts: set[int], repeat: Repeat | None, step: int,
           short: int = 0) -> list[tuple[int, int] | Blocks]:
    """The passes ``lo..hi`` as pieces (split at ``starts`` and ``repeat``'s breakpoints) and, where a stretch
    between two of ``starts`` holds at least MIN_BLOCKS periods of ``repeat`` (a multiple of ``step``, the
    residue classes' modulus), the whole periods as Blocks from its first breakpoint. Pieces of at most ``short``
    passes are split pass by pass."""
    if repeat is None:
        return list(_short(pieces(lo, hi, starts), short))
    length = math.lcm(repeat.every, step)
    out: list[tuple[int, int] | Blocks] = []
    for a, b in pieces(lo, hi, starts):
        first = repeat.first(a)  # the breakpoints listed only near the stretch's ends: its length costs nothing
        count = (b + 1 - first) // length
        if count < MIN_BLOCKS:
            out += _short(pieces(a, b, repeat.within(a, b)), short)
            continue
        end = first + count * length
        out += _short(pieces(a, first - 1, repeat.within(a, first - 1)), short) if first > a else []
        parts = _short(pieces(first, first + length - 1, repeat.within(first, first + length - 1)), short)
        out.append(Blocks(first, length, count, [(x - first, y - first) for x, y in parts]))
        out += _short(pieces(end, b, repeat.within(end, b)), short) if end <= b else []
    return out


def _short(parts: list[tuple[int, int]], short: int) -> list[tuple[int, int]]:
    """``parts`` with each of at most ``short`` passes split into single passes."""
    return [q for a, b in parts for q in ([(x, x) for x in range(a, b + 1)] if b - a + 1 <= short else [(a, b)])]


def block_counts(f: Callable[[int], Counts], blocks: Blocks, step: int, total: dict[str, list[int]]) -> None:
    """Add every block's sums to ``total``: three blocks' sums over their parts, a polynomial in the block's
    index."""
    sums: list[dict[str, list[int]]] = [{} for _ in range(3)]
    for j, block in enumerate(sums):
        for a, b in blocks.parts:
            piece_sum(f, blocks.start(j) + a, blocks.start(j) + b, step, block)
    for key in dict.fromkeys(k for block in sums for k in block):
        acc = total.setdefault(key, [0, 0, 0])
        for i in range(3):
            acc[i] += Newton([block.get(key, [0, 0, 0])[i] for block in sums]).prefix(blocks.repeats)


def blocks_time(times: Times, f: Callable[[int], Counts], rates: Callable[[int], Callable[[str], Rates]],
                blocks: Blocks, step: int) -> None:
    """Add the times of every block's passes, each part's residue class and component at a time; ``rates``: of
    the part in the middle block."""
    middle = blocks.start(blocks.repeats // 2)
    for a, b in blocks.parts:
        rate = rates(middle + (a + b) // 2)
        for first, n in classes(a, b, step):
            grid = [[f(blocks.start(j) + first + step * t) for t in range(min(n, 3))] for j in range(3)]
            keys = dict.fromkeys(k for counts in grid for c in counts for k in c)
            by_block = [polynomials(counts, keys) for counts in grid]
            for key in keys:
                _surface_time(times, rate(key), [polys[key] for polys in by_block], blocks.repeats, n)


def _surface_time(times: Times, rates: Rates, polys: list[list[Newton]], m: int, n: int) -> None:
    """Passes ``t < n`` of blocks ``j < m`` of one component, whose (matmul, elementwise, bytes) polynomials in t
    on blocks 0, 1 and 2 are ``polys`` (on block j each count at a pass is a quadratic in j through them)."""
    surface = Surface(polys, rates)
    todo = [(0, m - 1, 0, n - 1, False)]  # blocks j0..j1, passes t0..t1, split at the crossings already
    while todo:
        j0, j1, t0, t1, split = todo.pop()
        roof = surface.roof(j0, j1, t0, t1)
        if roof is not None:
            sums = {i: Newton([p[i].prefix(t1 + 1) - p[i].prefix(t0) for p in polys]) for i in roof}
            times.add_bound(rates, {i: s.prefix(j1 + 1) - s.prefix(j0) for i, s in sums.items()})
            continue
        parts = [(t0, t1)] if split else pieces(t0, t1, surface.crossings(j0, j1, t0, t1))
        if len(parts) > 1:
            todo += [(j0, j1, a, b, True) for a, b in parts]
        elif j1 - j0 < MIN_BLOCKS:
            for j in range(j0, j1 + 1):  # block j's polynomials from pass t0 on
                mm, ew, nbytes = (Newton([Newton([p[i].at(t) for p in polys]).at(j)
                                          for t in range(t0, min(t1, t0 + 2) + 1)]) for i in range(3))
                times.add(rates, mm, ew, nbytes, t1 - t0 + 1)
        else:
            mid = (j0 + j1) // 2
            todo += [(j0, mid, t0, t1, False), (mid + 1, j1, t0, t1, False)]


class Surface:
    """A component's compute time less its memory time on pass t of block j: a polynomial in (j, t) from its
    polynomials in t on blocks 0, 1 and 2, of degree at most 2 in both together for the counts a pass has (a
    pass's counts are of degree 2 in its position and chunk); one of higher degree (none known) has no roof here,
    and is summed block by block."""

    def __init__(self, polys: list[list[Newton]], rates: Rates) -> None:
        self.rates = rates
        counts = [_coefficients([p[c] for p in polys]) for c in range(3)]  # matmul, elementwise, bytes
        self.quadratic = all(count[i][a] == 0 for count in counts for i, a in ((1, 2), (2, 1), (2, 2)))
        sign = (1, 1, -1)
        self.by_j = [tuple(sum(sign[c] * (counts[c][i][a] / 4) / rates[c] for c in range(3)) for a in range(3))
                     for i in range(3)]
        # the size of the terms behind each coefficient: a float's rounding of the difference is relative to it
        self.sizes = [tuple(sum(abs(counts[c][i][a]) / 4 / rates[c] for c in range(3)) for a in range(3))
                      for i in range(3)]
        self.counts = counts

    def at(self, j: float, t: float) -> float:
        return _value(self.by_j, j, t)

    def crossings(self, j0: int, j1: int, t0: int, t1: int) -> set[int]:
        """Where a run of passes starts around a crossing of the roofs on block j0 or j1."""
        out = set()
        for j in (j0, j1):
            power = [sum(e * j ** a for a, e in enumerate(self.by_j[i])) for i in range(3)]
            out |= {math.floor(r) + k for r in roots(*power) if t0 - 2 < r < t1 + 2 for k in (0, 1)}
        return out

    @functools.cached_property
    def exact(self) -> list[tuple[Fraction, ...]]:
        """The coefficients in fractions: the rates' floats converted exactly."""
        rates = [Fraction(r) for r in self.rates]
        return [tuple(sum((sign * Fraction(self.counts[c][i][a], 4) / rates[c] for c, sign in enumerate((1, 1, -1))),
                          Fraction(0)) for a in range(3)) for i in range(3)]

    def roof(self, j0: int, j1: int, t0: int, t1: int) -> tuple[int, ...] | None:
        """Which sums bound every pass of the rectangle ((0, 1): the FLOPs', (2,): the bytes'), or None where the
        roofs cross: the difference's extremes on it are at a corner, an edge's vertex or its stationary point.
        In floats unless one of those values is too near 0 to trust its sign: then exactly, in fractions."""
        if not self.quadratic:
            return None
        points = _extremes(self.by_j, j0, j1, t0, t1)
        values = [self.at(j, t) for j, t in points]
        if any(abs(v) <= 1e-12 * _value(self.sizes, abs(j), abs(t)) for v, (j, t) in zip(values, points)):
            values = [_value(self.exact, j, t)
                      for j, t in _extremes(self.exact, Fraction(j0), Fraction(j1), Fraction(t0), Fraction(t1))]
        if all(v >= 0 for v in values):
            return (0, 1)
        if all(v <= 0 for v in values):
            return (2,)
        return None


def _coefficients(polys: list[Newton]) -> list[tuple[int, int, int]]:
    """[i]: 4 times the coefficients (of 1, j, j^2) of t^i of a count whose polynomials in t on blocks 0, 1 and 2
    are ``polys``, integers."""
    out = []
    for i in range(3):
        v = [(2 * p.y, 2 * p.d1 - p.d2, p.d2)[i] for p in polys]  # twice the coefficient of t^i (Newton.power)
        d = v[2] - 2 * v[1] + v[0]
        out.append((2 * v[0], 2 * v[1] - 2 * v[0] - d, d))
    return out


def _value(by_j: list[tuple], j, t):
    return sum((e0 + e1 * j + e2 * j * j) * t ** i for i, (e0, e1, e2) in enumerate(by_j))


def _extremes(by_j: list[tuple], j0, j1, t0, t1) -> list[tuple]:
    """The points of the rectangle where a polynomial of degree at most 2 in (j, t) together can be extreme."""
    def vertex(c1, c2, lo, hi) -> list:
        return [-c1 / (2 * c2)] if c2 and lo < -c1 / (2 * c2) < hi else []

    points = [(j, t) for j in (j0, j1) for t in (t0, t1)]
    for j in (j0, j1):
        c1, c2 = (sum(e * j ** a for a, e in enumerate(by_j[i])) for i in (1, 2))
        points += [(j, t) for t in vertex(c1, c2, t0, t1)]
    for t in (t0, t1):
        c1, c2 = (sum(by_j[i][a] * t ** i for i in range(3)) for a in (1, 2))
        points += [(j, t) for j in vertex(c1, c2, j0, j1)]
    (_, b, dd), (c, e, _), (f, _, _) = by_j  # .. + b j + dd j^2 + c t + e j t + f t^2
    det = 4 * dd * f - e * e
    if det:
        j, t = (e * c - 2 * f * b) / det, (e * b - 2 * dd * c) / det
        points += [(j, t)] if j0 < j < j1 and t0 < t < t1 else []
    return points
