"""A command's options as data, read two ways: by Typer, to build the command, and by
:func:`parse`, which reads the usual command line without importing Typer.

Typer and its copy of click take about 50 ms to import: a third of an analytic command's start
(benchmarks/startup.py), more than the whole answer costs. So a command declares its options
with :class:`Option` and :class:`Argument`, Typer's own calls as data, and:

- :func:`typer_command` hands Typer the command with the real ``typer.Option`` defaults (help,
  usage errors, every spelling click accepts);
- :func:`parse` reads a command line made only of the command's own options, each at most once
  (``--seq 1024``, ``--seq=1024``, ``-j 2``, flags), and its positional arguments, to the keyword
  arguments Typer would pass. Anything else (``--help``, an unknown or repeated option, ``--``,
  a value that starts with ``-``, a number ``int`` or ``float`` cannot read, a missing required
  value, an optional positional word left out) gives None and goes to Typer, which answers it.
  tests/test_options.py draws command lines for every command and checks that each one parse
  accepts gives Typer's arguments.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, Union, get_args, get_origin

# Typer's keywords that change only --help; any other (envvar, callback, min, multiple...)
# changes what a value becomes, so parse leaves that command to Typer
IGNORED = {"help", "metavar", "show_default", "hidden", "rich_help_panel"}


class _Param:
    """``typer.<kind>(default, *decls, **kwargs)``, kept as data; ``...``: required."""

    __slots__ = ("default", "decls", "kwargs")

    def __init__(self, default: Any, *decls: str, **kwargs: Any) -> None:
        self.default, self.decls, self.kwargs = default, decls, kwargs

    def typer(self):
        import typer

        return getattr(typer, type(self).__name__)(self.default, *self.decls, **self.kwargs)


class Option(_Param):
    """``typer.Option``: ``Option(None, "--seq", help=...)``."""


class Argument(_Param):
    """``typer.Argument``: the command's positional value(s)."""


def typer_command(func: Callable) -> Callable:
    """``func`` as Typer reads a command: its :class:`Option` and :class:`Argument` defaults
    made Typer's own."""
    sig = inspect.signature(func, eval_str=True)

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        return func(**kwargs)

    command.__signature__ = sig.replace(parameters=[
        p.replace(default=p.default.typer()) if isinstance(p.default, _Param) else p
        for p in sig.parameters.values()])
    return command


def _base(hint: Any) -> Any:
    """``Optional[X]`` -> ``X``."""
    if get_origin(hint) is Union:
        rest = [a for a in get_args(hint) if a is not type(None)]
        return rest[0] if len(rest) == 1 else hint
    return hint


def _value(hint: Any, text: str) -> tuple[bool, Any]:
    """(read, value) of one option value as click reads it for ``hint``: str as given, int and
    float through ``int()`` and ``float()`` as click's INT and FLOAT do."""
    kind = _base(hint)
    if kind is str:
        return True, text
    if kind in (int, float):
        try:
            return True, kind(text)
        except ValueError:
            return False, None
    return False, None


def parse(func: Callable, argv: list[str]) -> Optional[dict[str, Any]]:
    """The keyword arguments Typer would call ``func`` with for ``argv`` (the words after the
    command's name), or None where this reader leaves the command line to Typer."""
    sig = inspect.signature(func, eval_str=True)
    names: dict[str, str] = {}  # "--seq" -> "seq"
    arguments = []
    for p in sig.parameters.values():
        if isinstance(p.default, _Param) and set(p.default.kwargs) - IGNORED:
            return None
        if isinstance(p.default, Option):
            names.update(dict.fromkeys(p.default.decls, p.name))
        elif isinstance(p.default, Argument):
            arguments.append(p)
    given: dict[str, Any] = {}
    positional: list[str] = []
    words = iter(argv)
    for word in words:
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        decl, eq, text = word.partition("=") if word.startswith("--") else (word, "", "")
        name = names.get(decl)
        if name is None or name in given:
            return None
        hint = sig.parameters[name].annotation
        if _base(hint) is bool:
            if eq:
                return None
            given[name] = True
            continue
        if not eq:
            text = next(words, None)
            if text is None or text.startswith("-"):
                return None
        ok, given[name] = _value(hint, text)
        if not ok:
            return None
    kwargs = {}
    for p in sig.parameters.values():
        if p.name in given:
            kwargs[p.name] = given[p.name]
        elif isinstance(p.default, Option):
            if p.default.default is ...:
                return None
            kwargs[p.name] = p.default.default
    for p in arguments:  # in order: one word each, the rest to a list (click's nargs=-1)
        many = get_origin(_base(p.annotation)) is list
        taken, positional = (positional, []) if many else (positional[:1], positional[1:])
        read = [_value(get_args(_base(p.annotation))[0] if many else p.annotation, w) for w in taken]
        if not all(ok for ok, _ in read) or (len(read) != 1 and not many) or (not read and p.default.default is ...):
            return None
        values = [v for _, v in read]
        kwargs[p.name] = (values or None) if many else values[0]
    return None if positional else kwargs
