"""Integer polynomials of degree at most 2 over a run of passes, and sums of pass times under two roofs: the
primitives of the closed-form sums (:mod:`.steps`, :mod:`.blocks`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

Counts = dict[str, tuple[int, int, int]]  # component -> (matmul FLOPs, elementwise FLOPs, bytes)
Rates = tuple[float, float, float]  # matmul FLOP/s, elementwise FLOP/s, bytes/s
ZERO = (0, 0, 0)


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


def roots(c: float, b: float, a: float) -> list[float]:
    """Real roots of c + b x + a x^2 = 0, the constant first (floats: only where to split; each side's roof is
    then compared at its passes)."""
    if a == 0:
        return [-c / b] if b else []
    disc = b * b - 4 * a * c
    if disc < 0:
        return []
    q = -(b + math.copysign(math.sqrt(disc), b)) / 2  # the stable form: no cancellation
    return [q / a, c / q] if q else [-b / (2 * a)]


def classes(a: int, b: int, step: int) -> list[tuple[int, int]]:
    """The passes ``a..b`` by residue class modulo ``step``: (the first, how many) of each."""
    return [(a + r, (b - a - r) // step + 1) for r in range(min(step, b - a + 1))]


def polynomials(counts: list[Counts], keys: Iterable[str] | None = None) -> dict[str, list[Newton]]:
    """Each component's (matmul, elementwise, bytes) polynomials through ``counts``, a class's first passes' (a
    component absent from a pass: 0), in the order the components first appear; ``keys``: those components."""
    keys = dict.fromkeys(k for c in counts for k in c) if keys is None else keys
    return {key: [Newton([c.get(key, ZERO)[i] for c in counts]) for i in range(3)] for key in keys}


def piece_sum(f: Callable[[int], Counts], a: int, b: int, step: int, total: dict[str, list[int]]) -> None:
    """Add sum_{x=a..b} f(x) to ``total``, f polynomial on each residue class modulo ``step``."""
    for first, n in classes(a, b, step):
        for key, polys in polynomials([f(first + step * t) for t in range(min(n, 3))]).items():
            acc = total.setdefault(key, [0, 0, 0])
            for i, p in enumerate(polys):
                acc[i] += p.prefix(n)


class Times:
    """The integer sums behind a sum of pass times, by rates: a component's FLOPs where its compute
    time is the larger, its bytes where its memory time is."""

    def __init__(self) -> None:
        self.sums: dict[Rates, list[int]] = {}

    def add(self, rates: Rates, mm: Newton, ew: Newton, nbytes: Newton, n: int) -> None:
        """The passes k = 0..n-1 of one component whose counts are these polynomials in k."""
        P, V, B = rates
        acc = self.sums.setdefault(rates, [0, 0, 0])
        power = [m / P + e / V - b / B for m, e, b in zip(mm.power(), ew.power(), nbytes.power())]
        cuts = {math.floor(r) + k for r in roots(*power) if -2 < r < n + 2 for k in (-1, 0, 1, 2)}
        for a, b in pieces(0, n - 1, cuts):
            # no crossing strictly inside: the larger roof at an end or the middle is the piece's,
            # compared as the pass's own Component compares them
            diffs = [mm.at(k) / P + ew.at(k) / V - nbytes.at(k) / B for k in (a, b, (a + b) // 2)]
            if next((d for d in diffs if d), 0) >= 0:
                acc[0] += mm.prefix(b + 1) - mm.prefix(a)
                acc[1] += ew.prefix(b + 1) - ew.prefix(a)
            else:
                acc[2] += nbytes.prefix(b + 1) - nbytes.prefix(a)

    def add_bound(self, rates: Rates, sums: dict[int, int]) -> None:
        """Sums one roof bounds, by index: 0 and 1 (matmul and elementwise FLOPs) or 2 (bytes)."""
        acc = self.sums.setdefault(rates, [0, 0, 0])
        for i, n in sums.items():
            acc[i] += n

    @property
    def seconds(self) -> float:
        return sum(m / P + e / V + b / B for (P, V, B), (m, e, b) in self.sums.items())
