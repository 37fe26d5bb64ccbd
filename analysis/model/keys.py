"""The check of each config key, and reading a mapping of keys into a frozen dataclass whose fields
carry their checks (:func:`read_fields`): the machinery :mod:`.config`'s schema and the nested schemas
of the variants (a recurrent mixer's, the vision tower's, each in its own module) are written in.

A field is declared ``checked(check, default)``; ``check(checker, key, value)`` returns the stored
value or raises :class:`~analysis.errors.ConfigError` through ``checker``, which names the file, the
key (``moe.step`` for a nested one) and its YAML line."""

from __future__ import annotations

import dataclasses
import difflib
import math
import unicodedata
from dataclasses import field
from importlib import import_module
from typing import Any, Callable

from ..errors import ConfigError, brief, key_line
from .sizes import MAX_INT


def suggest(key: str, choices) -> str:
    """' (did you mean ...?)' for the closest of ``choices``, else ''."""
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Checker:
    """Raises ConfigError for one file; ``prefix`` names the enclosing mapping (``moe.``)."""

    def __init__(self, source: str | None, lines: dict[str, int], prefix: str = ""):
        self.source, self.lines, self.prefix = source, lines, prefix

    def fail(self, key: str | None, message: str):
        """Raise for ``key`` (``moe.step`` names a nested key, and its own line)."""
        full = self.prefix + key if key else None
        raise ConfigError(message, self.source, full, key_line(self.lines, full) if full else None)

    def nested(self, key: str) -> "Checker":
        return Checker(self.source, self.lines, self.prefix + key + ".")


# -- per-field checks: (checker, key, value) -> the stored value ---------------------------

Check = Callable[[Checker, str, Any], Any]


def integer(minimum: int = 1, maximum: int = MAX_INT) -> Check:
    def check(c: Checker, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            c.fail(key, f"must be an integer, got {brief(value)}")
        if value < minimum:
            c.fail(key, f"must be >= {minimum}, got {brief(value)}")
        if value > maximum:
            c.fail(key, f"must be at most {maximum:,}, got {brief(value)}")
        return value
    return check


def optional(inner: Check) -> Check:
    def check(c: Checker, key: str, value: Any) -> Any:
        return None if value is None else inner(c, key, value)
    return check


def boolean(c: Checker, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        c.fail(key, f"must be true or false, got {brief(value)}")
    return value


def choice(choices) -> Check:
    choices = tuple(choices)

    def check(c: Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            hint = suggest(value, choices) if isinstance(value, str) else ""
            c.fail(key, f"unknown value {brief(value)}{hint}; "
                        f"expected one of: {', '.join(choices)}")
        return value
    return check


def text(required: bool) -> Check:
    def check(c: Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or (required and not value.strip()):
            c.fail(key, f"must be a non-empty string, got {brief(value)}")
        if any(unicodedata.category(ch) == "Cc" for ch in value):
            # an escape sequence or a newline would rewrite the terminal or split a table row
            # (a lone surrogate, from a directory name that is not UTF-8, is escaped on output)
            c.fail(key, f"must be printable text (no control characters), got {brief(value)}")
        return value
    return check


def number(maximum: float = math.inf) -> Check:
    """A finite positive number (at most ``maximum``), also one written as text (``"1e6"``)."""
    def check(c: Checker, key: str, value: Any) -> float:
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and 0 < number <= maximum):
            bound = "" if maximum == math.inf else f" at most {maximum:g}"
            c.fail(key, f"must be a positive number{bound}, got {brief(value)}")
        return number
    return check


def pattern(inner: Check) -> Check:
    """A non-empty list, repeated cyclically over the layers; stored as a tuple."""
    def check(c: Checker, key: str, value: Any) -> tuple:
        if not isinstance(value, list) or not value:
            c.fail(key, f"must be a non-empty list, got {brief(value)}")
        return tuple(inner(c, key, v) for v in value)
    return check


def names(c: Checker, key: str, value: Any) -> tuple[str, ...]:
    """A list of names, possibly empty; stored as a tuple."""
    if not isinstance(value, list):
        c.fail(key, f"must be a list, got {brief(value)}")
    return tuple(text(True)(c, key, v) for v in value)


def one_of(*values: int) -> Check:
    def check(c: Checker, key: str, value: Any) -> int:
        if type(value) is not int or value not in values:
            c.fail(key, f"must be {' or '.join(map(str, values))}, got {brief(value)}")
        return value
    return check


def mapping(cls) -> Check:
    def check(c: Checker, key: str, value: Any) -> Any:
        return None if value is None else read_fields(cls, value, c.nested(key))
    return check


def checked(check: Check, default: Any = dataclasses.MISSING) -> Any:
    return field(default=default, metadata={"check": check})

def nested(module: str, name: str) -> Check:
    """A mapping read into the schema ``name`` of ``analysis.model.<module>``, the module describing a
    variant most models lack (a recurrent mixer, the vision tower): it is imported when a config has
    the key, so a model without one never builds that schema (start-up, DESIGN.md section 6)."""
    def check(c: Checker, key: str, value: Any) -> Any:
        if value is None:
            return None
        return read_fields(getattr(import_module(f"{__package__}.{module}"), name), value, c.nested(key))
    return check


def required(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING)



def as_raw(obj: Any) -> dict[str, Any]:
    """The mapping a file would give for ``obj`` (a ModelConfig or one of its nested configs): its required
    keys and those at other than their defaults, tuples as lists, nested configs as mappings."""
    fields = dataclasses.fields(obj)
    return {f.name: raw_value(getattr(obj, f.name)) for f in fields
            if f.default is dataclasses.MISSING or getattr(obj, f.name) != f.default}


def raw_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_raw(value)
    return list(value) if isinstance(value, tuple) else value


def read_fields(cls, raw: Any, check: Checker):
    """``cls`` from a mapping, each value through its field's check (unknown and missing keys
    are errors)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not isinstance(raw, dict):
        if check.prefix:  # a nested mapping (moe, mla): the error names the key holding it
            Checker(check.source, check.lines).fail(check.prefix[:-1], f"must be a mapping, got {brief(raw)}")
        check.fail(None, "empty: expected a mapping of config keys" if raw is None else
                   f"expected a mapping of config keys, got {type(raw).__name__}")
    for key in raw:
        if not isinstance(key, str) or key not in fields:
            check.fail(str(key), "unknown key" + suggest(str(key), fields))
    for key in required(cls):
        if key not in raw:
            check.fail(key, "missing required key")
    return cls(**{k: fields[k].metadata["check"](check, k, v) for k, v in raw.items()})
