"""options.parse, the reader that spares the usual command line Typer's import, against Typer
itself: every command line parse accepts must reach the command with exactly Typer's arguments."""

import functools
import importlib
import inspect
import subprocess
import sys
import typing
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from llmcalc.cli.app import COMMANDS, build, command
from llmcalc.cli.options import Argument, Option, parse

# option values and words that click reads in more than one way, or refuses
VALUES = ["1", "2", "1024", "0", "-1", "+3", " 4", "4 ", "1_000", "\u0663", "0x10", "1.5", "1e3", "nan", "-inf",
          "", "bf16", "1,8", "--json", "-", "--", "=", "a=b", "gpt2-small"]
VALID = {int: ["8", "1", "1024"], float: ["2", "0.5"], str: ["h100", "bf16", "1,8", "gpt2-small"]}
FUNCTIONS = {name: command(name) for name in COMMANDS}  # imported here, not while hypothesis draws
WORDS = ["gpt2-small", "llama-2-7b", "flops", "x", "-", "--", "-h", "--help", "--nope", "-x", "", "--seq=1"]


def _base(hint):
    """``Optional[X]`` -> ``X``."""
    if typing.get_origin(hint) is not typing.Union:
        return hint
    return next(a for a in typing.get_args(hint) if a is not type(None))


def _options(function) -> list[tuple[str, type, bool]]:
    """(spelling, type, required) of every option of ``function``."""
    sig = inspect.signature(function, eval_str=True)
    return [(decl, _base(p.annotation), p.default.default is ...) for p in sig.parameters.values()
            if isinstance(p.default, Option) for decl in p.default.decls]


@functools.cache
def _typer(name: str):
    """The application app.build makes with the command ``name`` (as the console script falls back
    to it), the command's function replaced by one that keeps the arguments of its last run."""
    seen: dict = {}
    module, attribute = COMMANDS[name]
    function = FUNCTIONS[name]

    @functools.wraps(function)
    def record(**kwargs):
        seen["kwargs"] = kwargs

    with mock.patch.object(importlib.import_module(f"llmcalc.cli.{module}"), attribute, record):
        return build([name]), seen


def typer_kwargs(name: str, argv: list[str]):
    """What Typer calls the command ``name`` with for ``argv``; None where it does not call it."""
    app, seen = _typer(name)
    seen.clear()
    result = CliRunner().invoke(app, [name, *argv])
    return seen.get("kwargs") if result.exit_code == 0 else None


def _same(a: dict, b: dict) -> bool:
    return repr(sorted(a.items())) == repr(sorted(b.items()))  # repr: nan equals nan


@st.composite
def command_lines(draw):
    """A command and words for it, in any order: its required options and positional words most
    of the time, then some of its options in every spelling, valid or not, and stray words."""
    name = draw(st.sampled_from(sorted(COMMANDS)))
    function = FUNCTIONS[name]
    chunks = []
    if draw(st.integers(0, 4)):
        chunks += [[w] for w in _typical(function, False, positional_only=True)]
        chunks += [[decl, VALID[hint][0]] for decl, hint, required in _options(function) if required]
    for decl, hint, _ in draw(st.lists(st.sampled_from(_options(function)), max_size=5)):
        value = st.sampled_from(VALID.get(hint, VALID[str])) | st.sampled_from(VALUES) | st.text(max_size=4)
        form = draw(st.sampled_from(["apart", "apart", "joined", "bare", "word"]))
        if form == "word":
            chunks.append([draw(st.sampled_from(WORDS) | st.text(max_size=4))])
        elif form == "bare" or hint is bool:
            chunks.append([decl])
        elif form == "joined":
            glue = "=" if decl.startswith("--") else draw(st.sampled_from(["", "="]))  # -j8, -j=8
            chunks.append([f"{decl}{glue}{draw(value)}"])
        else:
            chunks.append([decl, draw(value)])
    return name, [w for chunk in draw(st.permutations(chunks)) for w in chunk]


def test_what_parse_accepts_typer_reads_the_same():
    accepted = []

    @settings(max_examples=300, deadline=None)
    @given(command_lines())
    def check(line):
        name, argv = line
        fast = parse(FUNCTIONS[name], argv)
        if fast is not None:
            accepted.append(argv)
            slow = typer_kwargs(name, argv)
            assert slow is not None and _same(fast, slow), (argv, fast, slow)

    check()
    assert len(accepted) >= 40  # about 85 of the 300 lines: parse must not leave the usual ones to Typer


def _typical(function, joined: bool, positional_only: bool = False) -> list[str]:
    """Every option of ``function`` once (``--opt value``, or ``--opt=value`` where ``joined``), with a
    value of its type, and its positional words."""
    argv = []
    for p in inspect.signature(function, eval_str=True).parameters.values():
        hint = _base(p.annotation)
        if isinstance(p.default, Argument):
            argv += ["gpt2-small", "mistral-7b"] if typing.get_origin(hint) is list else ["flops"]
        elif positional_only:
            continue
        elif hint is bool:
            argv.append(p.default.decls[0])
        else:
            decl, value = p.default.decls[0], VALID[hint][-1]
            argv += [f"{decl}={value}"] if joined else [decl, value]
    return argv


@pytest.mark.parametrize("joined", [False, True])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_parse_reads_every_option_of_every_command(name, joined):
    """Each command's every option: parse reads it, as Typer does."""
    argv = _typical(FUNCTIONS[name], joined)
    fast = parse(FUNCTIONS[name], argv)
    assert fast is not None, argv
    assert _same(fast, typer_kwargs(name, argv))


@pytest.mark.parametrize("argv", [["--help"], ["--seq", "1024", "--seq", "2048"], ["--seq"], ["--", "gpt2-small"],
                                  ["--seq", "-5"], ["--tp", "two"], ["--json=1"], ["--nope"], ["-j=2"], ["-j2"]])
def test_parse_leaves_to_typer_what_it_does_not_read(argv):
    assert parse(FUNCTIONS["verify"], argv) is None


def test_the_analytic_commands_do_not_import_typer():
    lines = [["models"], ["params", "gpt2-xl"], ["flops", "gpt2-small", "--seq", "1024"],
             ["kvcache", "mistral-7b", "llama-2-7b", "--budget", "80GiB"],
             ["memory", "llama-2-7b", "--tp=2", "--dp", "2"],
             ["time", "llama-2-7b", "--hardware", "h100", "--json"], ["hardware", "--format", "csv"],
             ["plan", "gpt2-small", "--gpus", "8", "--hardware", "h100", "--global-batch", "64"]]
    code = ("import sys\n"
            "from llmcalc.cli.app import main\n"
            f"for sys.argv[1:] in {lines!r}:\n"
            "    try:\n        main()\n"
            "    except SystemExit as exc:\n        assert not exc.code, (sys.argv, exc.code)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich', 'yaml', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "[]"


def test_an_option_whose_value_typer_would_change_goes_to_typer():
    def plain(n: int = Option(1, "--n", help="N.")) -> None: ...

    def from_environment(n: int = Option(1, "--n", envvar="N")) -> None: ...

    assert parse(plain, ["--n", "2"]) == {"n": 2}
    assert parse(from_environment, ["--n", "2"]) is None
