"""Formatting: thousands separators, IEC bytes, SI FLOPs, shares, tables and JSON.

Everything the user reads is formatted here; ``analysis`` returns only integers.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

# Piped output keeps whole rows (rich would wrap at 80 columns) so it can be pasted and diffed.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


def count(n: int) -> str:
    return f"{n:,}"


def iec(n: int) -> str:
    """Bytes with binary units: KiB = 1024 B, MiB = 1024 KiB, ..."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{n:,} B" if unit == "B" else f"{value:,.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def si(n: int | float, unit: str = "") -> str:
    """A count with decimal prefixes: 1.5 TFLOP = 1.5e12 FLOP."""
    value = float(n)
    for prefix in ("", "K", "M", "G", "T", "P", "E", "Z"):
        if abs(value) < 1000 or prefix == "Z":
            return f"{value:,.0f} {unit}".rstrip() if not prefix else f"{value:,.2f} {prefix}{unit}"
        value /= 1000
    raise AssertionError("unreachable")


def share(part: int | float, whole: int | float) -> str:
    if not whole:
        return "-"
    pct = 100 * part / whole
    return "<0.1%" if 0 < pct < 0.05 else f"{pct:.1f}%"


def show(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]] = (),
         text_columns: tuple[int, ...] = (0,), footer: Iterable[Any] | None = None,
         sections: Iterable[Iterable[Iterable[Any]]] = ()) -> None:
    """Print a title line (never wrapped to the table's width) and a table whose columns
    are right-aligned numbers except ``text_columns``; ``sections`` are row groups after
    ``rows``, separated by a rule."""
    if title:
        console.print(title)
    t = Table(show_footer=footer is not None)
    footer = list(footer) if footer is not None else None
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i in text_columns else "right",
                     footer=str(footer[i]) if footer else "")
    for row in rows:
        t.add_row(*(str(c) for c in row))
    for i, section in enumerate(sections):
        if i or rows:
            t.add_section()
        for row in section:
            t.add_row(*(str(c) for c in row))
    console.print(t)


_NUMBER_LIST = re.compile(r"\[\s+(-?\d+(?:,\s+-?\d+)*)\s+\]")


def print_json(data: Any) -> None:
    """Indented JSON, with lists of integers (layer indices) kept on one line."""
    text = json.dumps(data, indent=2)
    text = _NUMBER_LIST.sub(lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]", text)
    sys.stdout.write(text + "\n")


def warn(message: str) -> None:
    err_console.print(f"[yellow]Warning:[/yellow] {message}")


def layer_list(layers: tuple[int, ...]) -> str:
    """Layer indices compactly: ``0-31``, ``1,3,..,41`` (a step), or a plain list."""
    if len(layers) == 1:
        return str(layers[0])
    steps = {b - a for a, b in zip(layers, layers[1:])}
    if len(steps) == 1:
        step = steps.pop()
        if step == 1:
            return f"{layers[0]}-{layers[-1]}"
        if len(layers) > 3:
            return f"{layers[0]},{layers[1]},..,{layers[-1]}"
    return ",".join(map(str, layers))


def group_label(group) -> str:
    """``layers 0-31 (32): mha full attention, dense FFN``."""
    return f"layers {layer_list(group.layers)} ({group.count}): {group.spec.describe()}"


def group_json(group, **figures) -> dict:
    """One entry of a ``layer_groups`` list: spec, layer indices, count, per-layer figures."""
    return {"spec": group.spec.as_dict(), "layers": list(group.layers), "count": group.count, **figures}
