"""The two exceptions for bad user input in ``analysis`` (the CLI maps both to exit 2):
:class:`ConfigError` for a file (naming file, key and line), :class:`SpecError` for a run spec
(naming its field); and the helpers that keep their one line short whatever the input holds.
:class:`UnmappedModelType` is the ConfigError of a Hugging Face ``model_type`` llmcalc has no
mapper for, which `llmcalc params` can still count through transformers."""

from __future__ import annotations

import reprlib
from typing import Any, Mapping

SHORT = 80  # characters of a value a message echoes
LONG = 160  # of a path (a Hugging Face cache snapshot's config.json alone is about 120)

# reprlib stops early, so a value's size never costs time: an alias-expanded YAML list of 10^8
# items is summarised after a few of them, and a 4,300-digit integer is never converted.
_REPR = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 6, 6, 4, 4
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = SHORT, 40, SHORT


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shorten(text: str, limit: int = SHORT) -> str:
    """``text`` as one printable line of at most ``limit`` characters: control characters and lone
    surrogates escaped (a newline in a path cannot split the message, and any stdout can encode
    it), the middle elided with ``...`` (both ends of a path say the most)."""
    if len(text) > 4 * limit:  # escape only what can be shown: the input may be megabytes
        text = text[:2 * limit] + text[-2 * limit:]
    text = _printable(text)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return text[:head] + "..." + text[len(text) - (limit - 3 - head):]


def brief(value: Any) -> str:
    """``repr(value)`` for a message: bounded in time and at most :data:`SHORT` characters."""
    return shorten(_REPR.repr(value))


class ConfigError(ValueError):
    """A user-facing problem with a model config: one line, naming file, key and line."""

    def __init__(self, message: str, source: str | None = None, key: str | None = None,
                 line: int | None = None):
        self.message, self.source, self.key, self.line = message, source, key, line
        where = "" if source is None else shorten(source, LONG) + (f":{line}" if line is not None else "")
        super().__init__((where + ": " if where else "") + (f"key {brief(key)}: " if key else "")
                         + shorten(message, 4 * LONG))


def key_line(lines: Mapping[str, int], key: str) -> int | None:
    """The line of the dotted ``key`` (``moe.step``) in a file's key lines (``load.files.read_yaml``'s),
    else of the nearest key holding it (a JSON file's, or a YAML list's items: their holder's)."""
    while key not in lines and "." in key:
        key = key.rsplit(".", 1)[0]
    return lines.get(key)


class UnmappedModelType(ConfigError):
    """A config.json whose ``model_type`` no mapper reads. It carries the file's mapping and the
    model's name, so that `llmcalc params` can count it through transformers' own model instead
    (:mod:`analysis.verify.fallback`); anything else refuses it."""

    def __init__(self, message: str, source: str, raw: dict[str, Any], name: str):
        super().__init__(message, source, "model_type")
        self.raw, self.name, self.model_type = raw, name, raw["model_type"]


class SpecError(ValueError):
    """A run spec that breaks a rule (``RunSpec``, ``Layout``, ``LoRA``, or what a function needs of
    them): ``field`` names it (``seq``, ``layout.tp``, ``lora.rank``) and ``message`` follows the
    name, ``SpecError("layout.pp", "62 must be at most the 61 layers of deepseek-v3")``. The CLI shows it
    with the option's name in place of the field's (``--pp 2 must divide ...``)."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, shorten(message, 4 * LONG)
        super().__init__(f"{field} {self.message}")
