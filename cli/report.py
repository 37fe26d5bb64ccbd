"""What a command prints, as data (:class:`Report`: the JSON document, the CSV rows, and the tables
and lines of text a table shows), and the plain-Python writers of JSON, CSV and Markdown.
Tables on a terminal or in a pipe are drawn by rich (:mod:`.terminal`)."""

import re
import sys
from typing import Any, NamedTuple, Sequence, Union

from . import terminal

FORMATS = ("table", "json", "csv", "markdown")


class Col(NamedTuple):
    """A table column. Numbers are right-aligned and never wrapped or cut; text folds."""

    header: str
    numeric: bool = True
    key: bool = False  # names the row (the first columns)
    optional: bool = False  # a description: dropped first when the terminal is too narrow


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
    terminal.say_warnings()
    if fmt == "json":
        print_json(report.data)
    elif fmt == "csv":
        _write_csv(report.csv)
    elif fmt == "markdown":
        sys.stdout.write("\n\n".join(_markdown(b) for b in report.blocks) + "\n")
    else:
        terminal.show(report.blocks)


def group_json(group, **figures) -> dict:
    """One entry of a ``layer_groups`` list: spec, layer indices, count, per-layer figures."""
    return {"spec": group.spec.as_dict(), "layers": list(group.layers), "count": group.count, **figures}


# --- JSON and CSV -----------------------------------------------------------------------------

_NUMBER_LIST = r"\[\s+(-?\d+(?:,\s+-?\d+)*)\s+\]"  # compiled on first use (by re), as _MD_SPECIAL


def print_json(data: Any) -> None:
    """Indented JSON, with lists of integers (layer indices) kept on one line."""
    import json  # here, not at the top: only --json pays its import at start-up (DESIGN section 6)

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
    import csv  # as json in print_json

    if not rows:  # nothing to list (plan with no layout that fits says why on stderr)
        return
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
