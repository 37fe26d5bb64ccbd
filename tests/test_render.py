"""Tables, titles and warnings are drawn without rich, byte for byte as rich drew them (in a pipe
and in a terminal, with its colours), and an analytic command never imports rich: rich alone was a
quarter of its start-up (DESIGN.md section 6)."""

import io
import subprocess
import sys

import pytest

from llmcalc.cli import render
from llmcalc.cli.render import Col, Report, Styled, Table, emit, text_col, verdict, warn


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal(monkeypatch):
    """``show(table, columns)``: what emit prints, to a terminal ``columns`` wide (None: a pipe)."""
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "LINES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")

    def show(table: Table, columns: int | None) -> str:
        out = _Terminal() if columns else io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setenv("COLUMNS", str(columns or 80))
        emit(Report(None, [], [table]), "table")
        return out.getvalue()

    return show


def _rich(table: Table, columns: int | None) -> str:
    """The same table as llmcalc printed it with rich.table (its HEAVY_HEAD box) before it drew
    tables itself."""
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    file = io.StringIO()
    console = Console(file=file, width=columns or render._PIPE_WIDTH, highlight=False,
                      force_terminal=columns is not None, color_system="standard" if columns else None)
    if table.title:
        console.print(Text(table.title))

    def cell(c, w: int) -> Text:
        return Text("\n".join(render._wrap(render._plain(c), w)), style=c.style if isinstance(c, Styled) else "")

    for part, (cols, widths) in enumerate(render._plan(table, columns)):
        t = RichTable(show_footer=table.footer is not None)
        for i, w in zip(cols, widths):
            col = table.columns[i]
            t.add_column(Text("\n".join(render._wrap(col.header, w))), justify="right" if col.numeric else "left",
                         footer=cell(table.footer[i], w) if table.footer else "", width=w, overflow="fold")
        shown = [i for i in cols if not table.columns[i].key]
        for n, section in enumerate(table.sections):
            if n:
                t.add_section()
            for row in section:
                if part == 0 or any(render._plain(row[i]) for i in shown):
                    t.add_row(*(cell(row[i], w) for i, w in zip(cols, widths)))
        needed = sum(widths) + render._overhead(len(widths))
        out = console if needed <= console.width else Console(
            file=file, width=needed, highlight=False, force_terminal=console.is_terminal,
            color_system=console.color_system)
        out.print(t)
    return file.getvalue()


NAMES = ["gpt2-small", "a-very-long-model-name-that-cannot-be-broken-anywhere-at-all", "llama 3.1 405b instruct",
         "[bold]x[/bold]", "modèle-ü"]

TABLES = [
    # a breakdown: a footer in bold, text with leading spaces, empty cells
    Table([text_col("component", key=True), Col("per layer"), Col("total"), Col("share")],
          [[("embedding/token", "", "38,597,376", "31.0%"), ("  attention/q", "590,592", "7,087,104", "5.7%"),
            ("  norm/attention_post", "1,536", "18,432", "<0.1%")]],
          "gpt2-small: parameters (12 layers)", footer=["total", "", "124,439,808", "100.0%"]),
    # sections (one empty), a bold label that wraps, numeric headers that wrap
    Table([text_col("component", key=True), Col("per layer"), Col("total over all its layers"), Col("share")],
          [[(Styled("layers 0,2,..,40 (21): mha sliding window 4,096, dense FFN", "bold"), "198,195,200",
             "4,162,099,200", "45.0%"), ("  mlp/up", "51,380,224", "1,078,984,704", "11.7%")], [],
           [("embedding/token", "", "917,962,752", "9.9%")]],
          "gemma-2-9b: parameters (42 layers, 2 layer kinds)", footer=[Styled("total", "red"), "", "9,241,705,984",
                                                                      "100.0%"]),
    # verdicts in colour; check names that wrap after a slash
    Table([text_col("check", key=True), Col("analytic"), Col("measured"), Col("difference"), Col("verdict")],
          [[("flops/eager/backward/attention/scores+values", "3,623,878,656", "3,623,878,656", "0", verdict(True)),
            ("kv_cache/prefill 16 + decode 2", "1,536", "1,535", "-1", verdict(False))]],
          "gpt2-small: verify on meta (seq 128, batch 2): 1/2 checks pass, and a title long enough to be broken "
          "between its words, with a_word_far_too_long_for_any_terminal_line_to_hold_whole_in_sixty_columns"),
    # side by side: a key column repeated in each part, a description dropped when narrow
    Table([text_col("model", key=True), Col("seq"), Col("total (batch 1)"), Col("bytes/token"), Col("weights"),
           Col("max batch"), Col("max tokens"), text_col("description", optional=True)],
          [[(name, f"{4096 * (i + 1):,}", f"{2 ** (30 + i):,}", "128.00 KiB", "14.96 GiB (bf16)",
             "" if i == 2 else "133", "544,859", "a model, described in a sentence of some length")
            for i, name in enumerate(NAMES)], [("qwen3-8b", "1", "2", "3", "4", "", "", "")]],
          "kvcache: budget 80GiB = 85,899,345,920 B"),
]


@pytest.mark.parametrize("columns", [None, 200, 100, 80, 60, 40, 24])
@pytest.mark.parametrize("table", TABLES, ids=["breakdown", "sections", "verdicts", "split"])
def test_tables_are_drawn_as_rich_drew_them(terminal, table, columns):
    assert terminal(table, columns) == _rich(table, columns)


@pytest.mark.parametrize("no_color", ["", "1"])
def test_colours_follow_the_terminal(terminal, monkeypatch, no_color):
    table = TABLES[2]
    monkeypatch.setenv("NO_COLOR", no_color)
    shown = terminal(table, 120)
    assert "\x1b[1m check" not in shown and "\x1b[1m" in shown  # the header in bold, its padding apart
    assert ("\x1b[32m" in shown) == (not no_color)  # NO_COLOR: bold stays, colours go
    assert "\x1b[" not in terminal(table, None)  # a pipe: no escape codes
    monkeypatch.setenv("TERM", "dumb")
    assert "\x1b[" not in terminal(table, 120)


@pytest.mark.parametrize("columns", [None, 80, 30])
def test_warnings_are_written_as_rich_wrote_them(monkeypatch, columns):
    from rich.console import Console
    from rich.text import Text

    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "LINES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", str(columns or 80))
    message = "[red]gpt2-xl[/red]: --seq 16,384 exceeds its context length (1,024); computing anyway"
    err = _Terminal() if columns else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    warn(message)
    expected = io.StringIO()
    Console(file=expected, width=columns or render._PIPE_WIDTH, highlight=False, force_terminal=columns is not None,
            color_system="standard" if columns else None).print(Text.assemble(("Warning:", "yellow"), " ", message))
    assert err.getvalue() == expected.getvalue()


def test_analytic_commands_never_import_rich():
    """In a fresh interpreter, as the console script runs them: tables (plain and in colour), JSON
    and CSV leave rich unimported."""
    code = """
import os, sys
from llmcalc.cli.app import main
commands = [["params", "gpt2-xl"], ["flops", "gpt2-small", "--seq", "1024"], ["kvcache", "mistral-7b"],
            ["params", "gemma-2-9b"], ["flops", "gpt2-small", "--seq", "4096"], ["models"],
            ["params", "gpt2-xl", "--format", "csv"], ["kvcache", "mistral-7b", "--format", "json"],
            ["memory", "mistral-7b", "--seq", "4096", "--format", "markdown"]]
for force in ("", "1"):
    os.environ["FORCE_COLOR"] = force  # "1": styles, as in a terminal
    for args in commands:
        sys.argv = ["llmcalc", *args]
        try:
            main()
        except SystemExit as exit:
            assert not exit.code, (args, exit.code)
        rich = sorted(m for m in sys.modules if m.split(".")[0] == "rich")
        print("rich imported after", args, force, rich, file=sys.stderr)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("rich imported after")]
    assert len(lines) == 18 and all(line.endswith(" []") for line in lines), proc.stderr
