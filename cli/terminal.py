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


def _rich(table: Table, keep_optional: bool) -> RichTable:
    shown = [i for i, c in enumerate(table.columns) if keep_optional or not c.optional]
    out = RichTable(box=box.HEAVY_HEAD, show_footer=table.footer is not None)
    for i in shown:
        col = table.columns[i]
        out.add_column(Text(col.header), justify="right" if col.numeric else "left", no_wrap=col.numeric,
                       overflow="fold", footer=_cell(table.footer[i]) if table.footer is not None else "")
    for n, section in enumerate(table.sections):
        if n and section:
            out.add_section()
        for row in section:
            out.add_row(*(_cell(row[i]) for i in shown))
    return out


def _print_table(out: Console, table: Table) -> None:
    if table.title:
        out.print(Text(table.title))
    drawn = _rich(table, keep_optional=True)
    if out.measure(drawn).minimum > out.width and any(c.optional for c in table.columns):
        drawn = _rich(table, keep_optional=False)
    least = out.measure(drawn).minimum
    # too wide even so: printed whole, for the terminal to wrap (a number is never cut)
    out.print(drawn, width=max(least, out.width), crop=False)


def show(blocks: Sequence[Union[Table, str]]) -> None:
    """Tables and lines of text, in order, on stdout."""
    out = console()
    for block in blocks:
        if isinstance(block, str):
            out.print(Text(block))
        else:
            _print_table(out, block)


def warn(message: str) -> None:
    console(stderr=True).print(Text.assemble(("Warning:", "yellow"), " ", message))
