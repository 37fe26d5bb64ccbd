"""Runs of passes that repeat: a chunked layer's chunks begin every C positions, each split alike at its
boundaries (:class:`Repeat`), so between two other breakpoints whole periods are blocks (:class:`Blocks`). A pass's
counts are of degree at most 2 in its position and its chunk's index together (a chunked layer attends to the keys
of its chunk: the position less C times the chunk's index), so over a block's pass t of block j they are a
polynomial of degree at most 2 in (j, t), and a block's sums one in j: summed over every block from three of them.
A component's time is summed so over each rectangle of blocks and passes that one roof bounds
(:meth:`Surface.roof`); where the roofs cross, the passes are split where they cross on the rectangle's first and
last blocks and the blocks halved, block by block only at a crossing a few blocks long."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

from .polynomial import ZERO, Counts, Newton, Rates, Times, classes, piece_sum, pieces, roots


class Repeat(NamedTuple):
    """Breakpoints that recur: ``k every + o`` for every integer ``k`` and each ``o`` of ``offsets``."""

    every: int
    offsets: frozenset[int]

    def within(self, lo: int, hi: int) -> set[int]:
        """The breakpoints in ``lo..hi``."""
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
        within = repeat.within(a, b)
        first = min(within, default=a)
        count = (b + 1 - first) // length
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
            def row(j: int, first: int = first, n: int = n) -> list[Counts]:  # a class's first passes in block j
                return [f(blocks.start(j) + first + step * t) for t in range(min(n, 3))]

            grid = [row(j) for j in range(3)]
            for key in dict.fromkeys(k for counts in grid for c in counts for k in c):
                def block(j: int, key: str = key) -> list[Newton]:
                    return [Newton([c.get(key, ZERO)[i] for c in row(j)]) for i in range(3)]

                _surface_time(times, rate(key), [block(j) for j in range(3)], block, blocks.repeats, n)


def _surface_time(times: Times, rates: Rates, polys: list[list[Newton]], block: Callable[[int], list[Newton]],
                  m: int, n: int) -> None:
    """Passes ``t < n`` of blocks ``j < m`` of one component, whose (matmul, elementwise, bytes) polynomials in t
    on block j are ``block(j)`` (``polys``: blocks 0, 1 and 2's)."""
    surface = Surface(polys, rates)
    todo = [(0, m - 1, 0, n - 1, False)]  # blocks j0..j1, passes t0..t1, split at the crossings already
    while todo:
        j0, j1, t0, t1, split = todo.pop()
        roof = surface.roof(j0, j1, t0, t1)
        if roof is not None:
            sums = {i: Newton([p[i].prefix(t1 + 1) - p[i].prefix(t0) for p in polys]) for i in roof}
            times.add_bound(rates, {i: s.prefix(j1 + 1) - s.prefix(j0) for i, s in sums.items()})
        elif not split:
            cuts = surface.crossings(j0, j1, t0, t1)
            todo += [(j0, j1, a, b, True) for a, b in pieces(t0, t1, cuts)]
        elif j1 - j0 < MIN_BLOCKS:
            for j in range(j0, j1 + 1):  # each polynomial from pass t0 on
                mm, ew, nbytes = (Newton([p.at(t) for t in range(t0, min(t1, t0 + 2) + 1)]) for p in block(j))
                times.add(rates, mm, ew, nbytes, t1 - t0 + 1)
        else:
            mid = (j0 + j1) // 2
            todo += [(j0, mid, t0, t1, False), (mid + 1, j1, t0, t1, False)]


class Surface:
    """A component's compute time less its memory time on pass t of block j: a polynomial of degree at most 2 in
    (j, t) together, from its polynomials in t on blocks 0, 1 and 2."""

    def __init__(self, polys: list[list[Newton]], rates: Rates) -> None:
        self.polys, self.rates = polys, rates
        self.by_j = _coefficients(polys, rates, float)
        # the size of the terms behind the coefficient of t^i (its floats' rounding is relative to it)
        self.sizes = [max(sum(_size(p)[i] / r for p, r in zip(ps, rates)) for ps in polys) for i in range(3)]

    def at(self, j: float, t: float) -> float:
        return _value(self.by_j, j, t)

    def crossings(self, j0: int, j1: int, t0: int, t1: int) -> set[int]:
        """Where a run of passes starts around a crossing of the roofs on block j0 or j1."""
        out = set()
        for j in (j0, j1):
            power = [sum(e * j ** a for a, e in enumerate(self.by_j[i])) for i in range(3)]
            out |= {math.floor(r) + k for r in roots(*power) if t0 - 2 < r < t1 + 2 for k in (0, 1)}
        return out

    def roof(self, j0: int, j1: int, t0: int, t1: int) -> tuple[int, ...] | None:
        """Which sums bound every pass of the rectangle ((0, 1): the FLOPs', (2,): the bytes'), or None where the
        roofs cross: the difference's extremes on it are at a corner, an edge's vertex or its stationary point.
        In floats unless one of those values is too near 0 to trust its sign: then exactly, in fractions."""
        points = _extremes(self.by_j, j0, j1, t0, t1)
        values = [self.at(j, t) for j, t in points]
        sizes = [sum(size * (1 + 4 * abs(j) + 2 * j * j) * abs(t) ** i for i, size in enumerate(self.sizes))
                 for j, t in points]  # the terms' size at each point: a float's rounding is relative to it
        if any(abs(v) <= 1e-12 * size for v, size in zip(values, sizes)):
            exact = _coefficients(self.polys, self.rates, Fraction)
            values = [_value(exact, j, t) for j, t in _extremes(exact, Fraction(j0), Fraction(j1), Fraction(t0),
                                                                  Fraction(t1))]
        if all(v >= 0 for v in values):
            return (0, 1)
        if all(v <= 0 for v in values):
            return (2,)
        return None


def _coefficients(polys: list[list[Newton]], rates: Rates, number: type) -> list[tuple]:
    """[i]: the coefficients (of 1, j, j^2) of t^i, each a quadratic in j through blocks 0, 1 and 2, in ``number``
    (float or Fraction)."""
    P, V, B = (number(r) for r in rates)

    def power(p: Newton) -> tuple:  # p's coefficients of 1, t, t^2
        return number(p.y), number(p.d1) - number(p.d2) / 2, number(p.d2) / 2

    out = []
    for i in range(3):
        v = [power(mm)[i] / P + power(ew)[i] / V - power(nb)[i] / B for mm, ew, nb in polys]
        d2 = v[2] - 2 * v[1] + v[0]
        out.append((v[0], v[1] - v[0] - d2 / 2, d2 / 2))
    return out


def _size(p: Newton) -> tuple[int, float, float]:
    """Bounds of the sizes of p's coefficients of 1, t and t^2 (:meth:`Newton.power`)."""
    return abs(p.y), abs(p.d1) + abs(p.d2) / 2, abs(p.d2) / 2


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
