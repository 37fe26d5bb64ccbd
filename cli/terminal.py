"""Tables and text on a terminal or in a pipe, drawn by rich.

A terminal gets its own width: text columns fold, numbers never wrap, and a table still too wide
loses its optional (description) columns, then is printed whole for the terminal to wrap; no
number or name is ever cut. A pipe or a file gets whole lines however wide, so output pasted or
diffed is never re-wrapped. Colours and bold only on a terminal (rich's rules: NO_COLOR,
FORCE_COLOR, TTY_COMPATIBLE, TERM=dumb)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Sequence, Union

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

if TYPE_CHECKING:  # report.py writes the other formats and hands tables here
    from .report import Cell, Table

PIPE_WIDTH = 1_000_000  # a pipe's lines are never wrapped


def console(stderr: bool = False) -> Console:
    """A console on the current stdout (or stderr): made for each use, as the streams can change."""
    out = Console(file=sys.stderr if stderr else sys.stdout, highlight=False, markup=False, emoji=False)
    if not out.is_terminal:
        out.width = PIPE_WIDTH
    return out


def _cell(cell: Cell) -> Text:
    """A cell as rich text (never markup: a name may hold brackets); a Styled cell in its style."""
    return Text(cell) if isinstance(cell, str) else Text(cell.text, style=cell.style)


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell.text


TEXT_FLOOR = 19  # a text column folds to no fewer characters a line (bundled names fit: nemotron-nano-9b-v2)


def _widths(table: Table) -> tuple[list[int], list[int]]:
    """Each column's widest cell (header and footer included), and its least width: a number's whole
    width (and its header's longest word), a text column's floor."""
    rows = [row for section in table.sections for row in section] + ([table.footer] if table.footer else [])
    widest, least = [], []
    for i, col in enumerate(table.columns):
        cells = max((cell_len(_text(r[i])) for r in rows), default=0)
        widest.append(max(cells, cell_len(col.header)))
        least.append(max([cells, *map(cell_len, col.header.split())]) if col.numeric else min(widest[-1], TEXT_FLOOR))
    return widest, least


def _rich(table: Table, shown: list[int], widest: list[int], least: list[int], whole: bool) -> RichTable:
    """``whole``: the lines are never wrapped (a pipe): each column is given its widest cell's width,
    so rich measures no cell again, and each section's rows go in as one row of multi-line cells."""
    out = RichTable(box=box.HEAVY_HEAD, show_footer=table.footer is not None)
    for i in shown:
        col = table.columns[i]
        # a column is never narrower than its least width (a number's whole width): a number's header
        # may wrap between words, the number never
        out.add_column(Text(col.header), justify="right" if col.numeric else "left",
                       overflow="fold", min_width=least[i],
                       width=widest[i] if whole else None, no_wrap=whole,
                       footer=_cell(table.footer[i]) if table.footer is not None else "")
    for n, section in enumerate(table.sections):
        if n and section:
            out.add_section()
        if whole and section:  # nothing wraps, so a section's column is one cell of lines: rich lays out each
            out.add_row(*(_lines([row[i] for row in section]) for i in shown))  # cell at a cost, rows line up
        else:
            for row in section:
                out.add_row(*(_cell(row[i]) for i in shown))
    return out


def _lines(cells: list[Cell]) -> Text:
    """Cells one below the other, each in its style: one multi-line cell."""
    out = Text()
    for k, cell in enumerate(cells):
        if k:
            out.append("\n")
        out.append_text(_cell(cell))
    return out


def _print_table(out: Console, table: Table) -> None:
    if table.title:
        _print_text(out, table.title)
    widest, least = _widths(table)
    shown = list(range(len(table.columns)))
    if _least(least, shown) > out.width:  # too narrow even with every text column folded: descriptions go
        shown = [i for i in shown if not table.columns[i].optional]
    # still too wide: drawn at its least width, for the terminal to wrap the longer lines
    out.print(_rich(table, shown, widest, least, out.width == PIPE_WIDTH), width=max(out.width, _least(least, shown)),
              crop=False)


def _least(least: list[int], shown: list[int]) -> int:
    """The table's least width: its columns' and, between and around them, a border and a space
    each side."""
    return sum(least[i] for i in shown) + 3 * len(shown) + 1


def _print_text(out: Console, text: str) -> None:
    """A line of text, broken between words on a terminal (a pipe's lines are whole)."""
    out.print(Text(text), soft_wrap=out.width == PIPE_WIDTH)


def show(blocks: Sequence[Union[Table, str]]) -> None:
    """Tables and lines of text, in order, on stdout."""
    out = console()
    for block in blocks:
        if isinstance(block, str):
            _print_text(out, block)
        else:
            _print_table(out, block)


_held: list[str] = []  # warnings not yet said: a command that then fails says only its error


def warn(message: str) -> None:
    """A warning about an option, said on stderr just before the command's output (or at its end),
    so that a command that then fails on another option shows one line, its error."""
    _held.append(message)


def say_warnings() -> None:
    """The held warnings, on stderr, in the order they were given."""
    out = console(stderr=True)
    for message in _held:
        out.print(Text.assemble(("Warning:", "yellow"), " ", message))
    drop_warnings()


def drop_warnings() -> None:
    _held.clear()
