"""Numbers as the user reads them: thousands separators, IEC bytes, SI FLOPs, durations, shares,
and layer indices. ``analysis`` returns only integers; every figure shown is formatted here."""

from __future__ import annotations

from decimal import Decimal
from typing import Sequence

# Python refuses to print an int of more than 4,300 digits; past ~3,900 digits (13,000 bits)
# figures are shown in scientific notation instead.
_MAX_DIGITS_BITS = 13_000


def count(n: int) -> str:
    if abs(n).bit_length() > _MAX_DIGITS_BITS:
        return _scientific(n)
    return f"{n:,}"


def _scientific(n: int) -> str:
    """An int of any size as ``1.23e+400``: Decimal holds it exactly, where float overflows."""
    return f"{Decimal(n):.2e}"


def _scaled(n: int, base: int, prefixes: Sequence[str], unit: str) -> str:
    """``n`` in the largest prefix that keeps it at least 1; integer arithmetic until the value
    is small, so no figure is too large for a float. Past a million of the largest prefix:
    scientific notation in the bare unit."""
    if abs(n) >= 10**6 * base ** (len(prefixes) - 1):
        return f"{_scientific(n)} {unit}".rstrip()
    for i, prefix in enumerate(prefixes):
        if abs(n) < base ** (i + 1) or i == len(prefixes) - 1:
            if not prefix:
                return f"{n:,} {unit}".rstrip()
            return f"{n / base**i:,.2f} {prefix}{unit}"
    raise AssertionError("unreachable")


def iec(n: int) -> str:
    """Bytes with binary units: KiB = 1024 B, MiB = 1024 KiB, ..."""
    return _scaled(n, 1024, ("", "Ki", "Mi", "Gi", "Ti", "Pi"), "B")


def si(n: int, unit: str = "") -> str:
    """A count with decimal prefixes: 1.5 TFLOP = 1.5e12 FLOP."""
    return _scaled(n, 1000, ("", "K", "M", "G", "T", "P", "E", "Z"), unit)


def seconds(t: float) -> str:
    """A duration in the unit that keeps it between 1 and 1,000 (hours and days past an hour)."""
    if t >= 86_400:
        return f"{t / 86_400:,.2f} days"
    if t >= 3_600:
        return f"{t / 3_600:,.2f} h"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if t >= scale:
            return f"{t / scale:.2f} {unit}"
    return f"{t * 1e9:.2f} ns"


def share(part: int, whole: int) -> str:
    if not whole:
        return "-"
    pct = 100 * part / whole  # int / int: exact to a float however large the two are
    return "<0.1%" if 0 < pct < 0.05 else f"{pct:.1f}%"


def rate(bandwidth: int | None) -> str:
    """A link's bandwidth, or that the hardware spec does not give it."""
    return "(not given)" if bandwidth is None else si(bandwidth, "B/s")


def layer_list(layers: tuple[int, ...]) -> str:
    """Layer indices compactly, as runs of consecutive layers: ``0-31``; a pattern that repeats with
    a step, ``1,3,..,41`` or ``0-2,4-6,..,44-46``, its last run shown apart where the layers cut it short
    (``0-4,6-10,..,54-58,60-61``); else the runs one by one (``0-2,5,9``)."""
    runs: list[tuple[int, int]] = []
    for i in layers:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    text = [f"{a}-{b}" if b > a else str(a) for a, b in runs]
    whole = _repeats(runs)
    if len(runs) > 3 and whole == len(runs):
        return f"{text[0]},{text[1]},..,{text[-1]}"
    if len(runs) > 4 and whole == len(runs) - 1 and runs[-1][0] - runs[-2][0] == runs[1][0] - runs[0][0]:
        return f"{text[0]},{text[1]},..,{text[-2]},{text[-1]}"  # the last run cut short by the last layer
    return ",".join(text)


def _repeats(runs: list[tuple[int, int]]) -> int:
    """How many runs from the first repeat it: the same length, each a fixed step after the one before."""
    n = 1
    while n < len(runs) and runs[n][1] - runs[n][0] == runs[0][1] - runs[0][0] \
            and runs[n][0] - runs[n - 1][0] == runs[1][0] - runs[0][0]:
        n += 1
    return n


def group_label(group) -> str:
    """``layers 0-31 (32): mha full attention, dense FFN``."""
    return f"layers {layer_list(group.layers)} ({group.count}): {group.spec.describe()}"
