"""Formatting and output: thousands separators, IEC bytes, SI FLOPs, shares, and the one writer
that prints a command's report as a table, JSON, CSV or Markdown.

Everything the user reads is formatted here; ``analysis`` returns only integers. Commands build
a ``Report`` (the JSON document, the CSV rows and the blocks a table shows) and hand it to ``emit``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, NamedTuple, Sequence, Union

FORMATS = ("table", "json", "csv", "markdown")

# A pipe gets whole lines (rows, titles, notes) however wide: output pasted or diffed is never
# re-wrapped. A terminal gets its own width, and tables are laid out for it (see _plan).
_PIPE_WIDTH = 1_000_000


def __getattr__(name: str) -> Any:
    """``err_console``: a rich console on stderr for verify's progress bar, made on first use:
    nothing else here imports rich."""
    if name == "err_console":
        from rich.console import Console

        made = globals()[name] = Console(stderr=True, highlight=False,
                                         width=None if _isatty(sys.stderr) else _PIPE_WIDTH)
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Python refuses to print an int of more than 4,300 digits; past ~3,900 digits (13,000 bits)
# figures are shown in scientific notation instead.
_MAX_DIGITS_BITS = 13_000


def count(n: int) -> str:
    if abs(n).bit_length() > _MAX_DIGITS_BITS:
        return _scientific(n)
    return f"{n:,}"


def _scientific(n: int) -> str:
    """An int of any size as ``1.23e+400``: Decimal holds it exactly, where float overflows."""
    from decimal import Decimal

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


# The records commands build are named tuples: a dataclass costs ~0.5 ms to create at import, in
# every run of every command.
class Col(NamedTuple):
    """A table column. Numbers are right-aligned and never wrapped or cut; text wraps."""

    header: str
    numeric: bool = True
    key: bool = False  # names the row: repeated in every part of a table split to fit a terminal
    optional: bool = False  # a description: dropped when the terminal cannot give it a readable width


def text_col(header: str, key: bool = False, optional: bool = False) -> Col:
    return Col(header, numeric=False, key=key, optional=optional)


class Styled(NamedTuple):
    """A cell shown in a style ("bold", "green", "red bold") in a terminal, in bold in Markdown
    when bold."""

    text: str
    style: str


def verdict(ok: bool) -> Styled:
    return Styled("ok", "green") if ok else Styled("FAIL", "red bold")


Cell = Union[str, Styled]


class Table(NamedTuple):
    columns: list[Col]
    sections: Sequence[Sequence[Sequence[Cell]]]  # row groups, separated by a rule
    title: str | None = None
    footer: Sequence[Cell] | None = None


class Report(NamedTuple):
    """What a command prints: ``data`` for --json, ``csv`` rows (flat dicts of raw values) for
    --format csv, and ``blocks`` (tables and lines of text, in order) for table and Markdown."""

    data: Any
    csv: list[dict]
    blocks: list[Union[Table, str]]


def emit(report: Report, fmt: str) -> None:
    if fmt == "json":
        print_json(report.data)
    elif fmt == "csv":
        _write_csv(report.csv)
    elif fmt == "markdown":
        sys.stdout.write("\n\n".join(_markdown(b) for b in report.blocks) + "\n")
    else:
        for block in report.blocks:
            if isinstance(block, Table):
                _print_table(block)
            else:
                _print_text(block)


# --- JSON and CSV -----------------------------------------------------------------------------

_NUMBER_LIST = r"\[\s+(-?\d+(?:,\s+-?\d+)*)\s+\]"  # compiled on first use (by re), as _MD_SPECIAL


def print_json(data: Any) -> None:
    """Indented JSON, with lists of integers (layer indices) kept on one line."""
    text = json.dumps(data, indent=2)
    text = re.sub(_NUMBER_LIST, lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]", text)
    sys.stdout.write(text + "\n")


def pick(record: dict, *paths: str) -> dict:
    """The CSV row of a JSON record: each column named by its JSON path (``forward.total`` is
    ``record["forward"]["total"]``), so CSV and JSON give the same numbers by construction.
    Paths missing from a record are left out (a blank cell)."""
    row = {}
    for path in paths:
        value: Any = record
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            row[path] = value
    return row


def _write_csv(rows: list[dict]) -> None:
    import csv

    header = list(dict.fromkeys(k for row in rows for k in row))  # every column, first seen first
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_csv_value(row.get(k)) for k in header])


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"  # as in the JSON
    return "" if value is None else value


# --- Markdown ---------------------------------------------------------------------------------

# Markdown's own characters; an underscore inside a word is literal, a line-leading # - + > =
# would start a heading, a list or a quote.
_MD_SPECIAL = r"[\\`*|<\[\]]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|^[#+>=-]"


def _md(text: str) -> str:
    """Text safe in a GitHub pipe table or paragraph."""
    return re.sub(_MD_SPECIAL, lambda m: "\\" + m.group(0), text.strip())


def _md_cell(cell: Cell, bold: bool = False) -> str:
    value = cell.text if isinstance(cell, Styled) else cell
    bold = bold or (isinstance(cell, Styled) and "bold" in cell.style)
    return f"**{_md(value)}**" if bold and value.strip() else _md(value)


def _markdown(block: Union[Table, str]) -> str:
    if not isinstance(block, Table):
        return _md(block)
    lines = [f"**{_md(block.title)}**", ""] if block.title else []
    lines.append("| " + " | ".join(_md(c.header) for c in block.columns) + " |")
    lines.append("|" + "|".join("---:" if c.numeric else ":---" for c in block.columns) + "|")
    for section in block.sections:
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in section]
    if block.footer is not None:
        lines.append("| " + " | ".join(_md_cell(c, bold=True) for c in block.footer) + " |")
    return "\n".join(lines)


# --- a terminal: its width, styles and line breaking ------------------------------------------
#
# Tables, titles and warnings are drawn here as rich drew them (the same box, padding, wrapping
# and escape codes, byte for byte), without importing rich: rich alone took a quarter of an
# analytic command's start-up. Where rich had a rule (what counts as a terminal, its width, how a
# long line breaks), the rule is rich's own.


def _isatty(stream: Any) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` takes escape codes: a terminal, unless TTY_COMPATIBLE or FORCE_COLOR
    says otherwise."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = os.environ.get("FORCE_COLOR")
    return force != "" if force is not None else _isatty(stream)


def _dumb(stream: Any) -> bool:
    return _is_terminal(stream) and os.environ.get("TERM", "").lower() in ("dumb", "unknown")


def _width(stream: Any) -> int:
    """The width lines are broken at: a pipe's is unbounded; a terminal's is $COLUMNS, else its own."""
    if not _isatty(stream):
        return _PIPE_WIDTH
    columns, lines = os.environ.get("COLUMNS", ""), os.environ.get("LINES", "")
    if columns.isdigit() and lines.isdigit():
        return int(columns)
    if _dumb(stream):
        return 80
    if columns.isdigit():
        return int(columns)
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            pass
    return 80


_COLORS = {"black": 30, "red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}


def _painter(stream: Any):
    """``paint(text, *styles)``: ``text`` in SGR escape codes for its styles ("bold", "red bold"),
    on a terminal only; NO_COLOR keeps bold and drops colours."""
    if not _is_terminal(stream) or _dumb(stream):
        return lambda text, *styles: text
    colour = os.environ.get("NO_COLOR", "") == ""

    def paint(text: str, *styles: str) -> str:
        words = " ".join(styles).split()
        codes = ["1"] if "bold" in words else []
        hues = [_COLORS[w] for w in words if w in _COLORS]
        if hues and colour:
            codes.append(str(hues[-1]))
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes and text else text

    return paint


# Control characters a terminal would act on (bell, backspace, vertical tab, form feed, carriage
# return) are dropped from what is shown.
_CONTROL = {c: None for c in (7, 8, 11, 12, 13)}


def _char_cells(c: str) -> int:
    from unicodedata import combining, east_asian_width

    return 0 if combining(c) else 2 if east_asian_width(c) in "WF" else 1


def _cells(text: str) -> int:
    """Terminal cells ``text`` takes: a wide (CJK) character two, a combining mark none."""
    return len(text) if text.isascii() else sum(map(_char_cells, text))


def _chop(text: str, width: int) -> list[str]:
    """``text`` cut into pieces of at most ``width`` cells."""
    if text.isascii():
        return [text[i:i + width] for i in range(0, len(text), width)]
    pieces, piece, size = [], "", 0
    for c in text:
        n = _char_cells(c)
        if size + n > width and piece:
            pieces.append(piece)
            piece, size = "", 0
        piece += c
        size += n
    return pieces + [piece] if piece else pieces


def _crop(text: str, width: int) -> str:
    return text if _cells(text) <= width else (_chop(text, width) or [""])[0]


_WORD = re.compile(r"\s*\S+\s*")


def _breaks(line: str, width: int) -> list[int]:
    """Where a line too long for ``width`` is broken: before the first word that does not fit, a
    word longer than a line cut into pieces (the trailing spaces stay on the line they end)."""
    breaks, offset = [], 0
    for m in _WORD.finditer(line):
        start, word = m.start(), m.group(0)
        length = _cells(word.rstrip())
        if width - offset >= length:
            offset += _cells(word)
        elif length > width:
            pieces = _chop(word, width)
            for n, piece in enumerate(pieces):
                if start:
                    breaks.append(start)
                if n == len(pieces) - 1:
                    offset = _cells(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = _cells(word)
    return breaks


def _lines(text: str, width: int) -> list[tuple[int, int]]:
    """The lines ``text`` is shown on at ``width``, as (start, end) offsets in ``text``: its own
    lines, each broken between words where too long (and tabs not expanded: see _fit)."""
    spans, start = [], 0
    for line in text.split("\n"):
        cuts = [0, *_breaks(line, width), len(line)] if _cells(line) > width else [0, len(line)]
        for a, b in zip(cuts, cuts[1:]):
            if b - a > width:  # whitespace past the width is dropped
                b -= min(b - a - width, len(line[a:b]) - len(line[a:b].rstrip()))
            spans.append((start + a, start + b))
        start += len(line) + 1
    return spans


def _fit(text: str, width: int, justify: str) -> list[str]:
    """The lines of a table cell, each exactly ``width`` cells: left- or right-justified."""
    text = text.translate(_CONTROL)
    if "\t" in text:
        text = "\n".join(line.expandtabs(8) for line in text.split("\n"))
    out = []
    for a, b in _lines(text, width):
        line = text[a:b]
        line = _crop(line.rstrip() if justify == "right" else line, width)
        pad = " " * (width - _cells(line))
        out.append(pad + line if justify == "right" else line + pad)
    return out


def _print_text(text: str, stream: Any = None, prefix: tuple[str, str] | None = None) -> None:
    """A title, note or warning: broken between words to the terminal's width (whole in a pipe).
    ``prefix``: (text, style) shown before it, one space apart."""
    stream = stream or sys.stdout
    paint = _painter(stream)
    head = (prefix[0] + " ") if prefix else ""
    text = (head + text).translate(_CONTROL)
    if "\t" in text:
        text = "\n".join(line.expandtabs(8) for line in text.split("\n"))
    width = _width(stream)
    styled = len(prefix[0]) if prefix else 0
    out = []
    for a, b in _lines(text, width):
        line = _crop(text[a:b], width)
        cut = min(max(styled - a, 0), len(line))
        out.append((paint(line[:cut], prefix[1]) if cut and prefix else "") + line[cut:])
    stream.write("\n".join(out) + "\n")
    stream.flush()


# --- tables in a terminal or a pipe -----------------------------------------------------------

_FLOOR = 16  # a text column wraps to no fewer characters a line than this (model names fit)
_OPTIONAL_FLOOR = 24  # a description narrower than this is dropped instead

# rich's HEAVY_HEAD box, and its ASCII box for a stream that cannot encode it. Rows: top, header
# cells, under the header, body cells, between sections, above the footer, footer cells, bottom;
# each row: left edge, line, column divider, right edge.
_BOX = ("┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "├─┼┤", "├─┼┤", "│ ││", "└─┴┘")
_ASCII_BOX = ("+--+", "| ||", "|-+|", "| ||", "|-+|", "|-+|", "| ||", "+--+")


def _plain(cell: Cell) -> str:
    return cell.text if isinstance(cell, Styled) else cell


def _wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` characters, broken after a space or a slash (check names are
    paths: ``flops/eager/`` + ``forward/total``); a longer piece is cut into width-long parts."""
    lines, line = [], ""
    for token in _PIECE.findall(text):
        if line.strip() and _cells((line + token).rstrip()) > width:
            lines.append(line.rstrip())
            line = token.lstrip()
        else:
            line += token
        while _cells(line.rstrip()) > width:
            head = _chop(line, width)[0]
            lines.append(head)
            line = line[len(head):]
    return lines + [line.rstrip()] if line.strip() or not lines else lines


_PIECE = re.compile(r"[^ /]*[ /]|[^ /]+")  # a word with the space or slash that ends it


def _longest_piece(text: str) -> int:
    return max((_cells(t.rstrip()) for t in _PIECE.findall(text)), default=0)


def _overhead(n: int) -> int:
    """Characters a table with ``n`` columns spends on borders and padding."""
    return 3 * n + 1


def _plan(table: Table, width: int | None) -> list[tuple[list[int], list[int]]]:
    """The column indices and widths of each table to print: one table at its natural width
    when it fits. Otherwise text columns wrap (down to _FLOOR), numeric headers wrap at their
    spaces, a description is dropped; and a table whose numbers still do not fit is split into
    several, each repeating the key columns. No number or name is ever cut."""
    rows = [row for section in table.sections for row in section] + ([table.footer] if table.footer else [])
    natural, least = [], []
    for i, col in enumerate(table.columns):
        cells = max((_cells(_plain(r[i])) for r in rows), default=0)
        natural.append(max(cells, _cells(col.header)))
        if col.numeric:
            least.append(max(cells, _longest_piece(col.header)))
        else:
            least.append(min(natural[-1], _OPTIONAL_FLOOR if col.optional else _FLOOR))
    every = list(range(len(table.columns)))
    if width is None or sum(natural) + _overhead(len(every)) <= width:
        return [(every, natural)]

    def fits(cols: list[int]) -> bool:
        return sum(least[i] for i in cols) + _overhead(len(cols)) <= width

    def widths(cols: list[int]) -> list[int]:
        """The least widths, then the room left to the names, the numbers' headers, other text."""
        out = {i: least[i] for i in cols}
        room = width - sum(out.values()) - _overhead(len(cols))
        for i in sorted(cols, key=lambda i: (not table.columns[i].key, not table.columns[i].numeric)):
            grow = max(0, min(room, natural[i] - out[i]))
            out[i] += grow
            room -= grow
        return [out[i] for i in cols]

    if fits(every):
        return [(every, widths(every))]
    kept = [i for i in every if not table.columns[i].optional]
    keys = [i for i in kept if table.columns[i].key] or kept[:1]
    parts: list[list[int]] = [[]]
    for i in (i for i in kept if i not in keys):
        if parts[-1] and not fits(sorted(keys + parts[-1] + [i])):
            parts.append([])
        parts[-1].append(i)
    # a part that cannot fit even alone is printed whole: the terminal wraps it, nothing is cut
    return [(cols, widths(cols) if fits(cols) else [natural[i] for i in cols])
            for cols in (sorted(keys + part) for part in parts)]


def _print_table(table: Table) -> None:
    out = sys.stdout
    if table.title:
        _print_text(table.title, out)
    utf = (getattr(out, "encoding", None) or "utf-8").lower().startswith("utf")
    lines: list[str] = []
    for part, (cols, widths) in enumerate(_plan(table, _width(out) if _is_terminal(out) else None)):
        lines += _draw(table, part, cols, widths, _BOX if utf else _ASCII_BOX, _painter(out))
    out.write("\n".join(lines) + "\n")
    out.flush()


def _draw(table: Table, part: int, cols: list[int], widths: list[int], box: tuple[str, ...], paint) -> list[str]:
    """The lines of one part of a table (the columns ``cols``, ``widths`` wide), as rich drew it."""
    columns = [table.columns[i] for i in cols]
    justify = ["right" if c.numeric else "left" for c in columns]
    lines: list[str] = []

    def rule(level: int) -> str:
        edge = box[level]  # left, line, divider, right
        return edge[0] + edge[2].join(edge[1] * (w + 2) for w in widths) + edge[3]

    def row(cells: Sequence[Cell], level: int, style: str = "") -> None:
        """One table row, its cells side by side, each as many lines as the tallest: the header's
        at the bottom, the others' at the top. A cell is padded by a space each side."""
        edge = box[level]
        blocks = []
        for cell, w, j in zip(cells, widths, justify):
            text = _fit("\n".join(_wrap(_plain(cell), w)), w, j)
            own = cell.style if isinstance(cell, Styled) else ""
            pad = paint(" ", style)
            blocks.append([pad + paint(t, style, own) + pad for t in text])
        height = max(map(len, blocks))
        for block, w in zip(blocks, widths):
            fill = [paint(" " * (w + 2), style)] * (height - len(block))
            if level == 1:
                block[:0] = fill
            else:
                block += fill
        lines.extend(edge[0] + edge[2].join(cells) + edge[3] for cells in zip(*blocks))

    lines.append(rule(0))
    row([c.header for c in columns], 1, "bold")
    lines.append(rule(2))
    shown = [i for i in cols if not table.columns[i].key]
    # a continuation part leaves out the rows it has nothing to show for
    groups = [[[r[i] for i in cols] for r in section if part == 0 or any(_plain(r[i]) for i in shown)]
              for section in table.sections]
    groups = [g for g in groups if g]
    for n, group in enumerate(groups):
        if n:
            lines.append(rule(4))
        for k, cells in enumerate(group):
            last = n == len(groups) - 1 and k == len(group) - 1 and table.footer is None
            row(cells, 6 if last else 3)
    if table.footer is not None:
        lines.append(rule(5))
        row([table.footer[i] for i in cols] if table.footer else [""] * len(cols), 6, "bold")
    lines.append(rule(7))
    return lines


# --- warnings and layer labels ----------------------------------------------------------------

def warn(message: str) -> None:
    _print_text(message, sys.stderr, ("Warning:", "yellow"))


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
