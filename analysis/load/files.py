"""Reading a config or hardware file: bounded, then parsed by a hardened YAML or JSON reader.

A config is a few kilobytes of plain data. Anything past these bounds is refused with one line
(a :class:`ConfigError` naming the file, and the key and line where known) before it can cost
memory, time or Python's recursion limit (the docs' "Exit codes and bad input"). YAML is read with
PyYAML's SafeLoader only (libyaml's parser beneath it where PyYAML has it).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

MAX_FILE_BYTES = 2**20  # 1 MiB: /dev/zero or a 10 GB file is never read whole
MAX_DEPTH = 32  # nesting of mappings and lists (Hugging Face configs nest 3 or 4 deep)
MAX_VALUES = 10_000  # YAML values, also once aliases are expanded ("billion laughs" makes 10^9)
MAX_DIGITS = 100  # of an integer literal (Python refuses to convert 4,300; MAX_INT has 16)


def config_file(path: Path) -> Path:
    """``path``, or for a model directory (a Hugging Face cache snapshot) its ``config.json``."""
    return path / "config.json" if os.path.isdir(path) else path


def read_text(path: Path) -> str:
    """The text of a config file: a regular file of at most MAX_FILE_BYTES of UTF-8, or
    ConfigError. The file type is checked on the open descriptor before anything is read, and
    the open itself never waits (a FIFO without a writer would block an ordinary open)."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ConfigError("no such file", source) from None
    except OSError as exc:  # too long, not a directory, a symlink loop, no permission, ...
        raise ConfigError(f"cannot read file: {exc.strerror or type(exc).__name__}", source) from None
    except ValueError:  # a NUL in the path (the API's; no command line can hold one)
        raise ConfigError("cannot read file: a path holds no NUL character", source) from None
    too_large = f"larger than {MAX_FILE_BYTES:,} bytes, so not a model config (those are a few KB)"
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked before open(): it refuses a directory's descriptor itself
        os.close(fd)
        raise ConfigError("is a directory" if stat.S_ISDIR(info.st_mode)
                          else "not a regular file (a FIFO, device or socket is never read)", source)
    with open(fd, "rb") as file:
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError(too_large, source)
        try:
            data = file.read(MAX_FILE_BYTES + 1)  # files that report no size (/proc) stop here too
        except OSError as exc:
            raise ConfigError(f"cannot read file: {exc.strerror or type(exc).__name__}", source) from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(too_large, source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not a YAML or JSON file (not UTF-8 text)", source) from None
    if "\x00" in text:
        raise ConfigError("not a YAML or JSON file (binary data)", source)
    return text


def _yaml_children(node) -> list:
    if node.id == "mapping":
        return [n for pair in node.value for n in pair]
    return list(node.value) if node.id == "sequence" else []


def _check_yaml(root, source: str) -> None:
    """The composed node graph, before any object is built: no duplicate key in any mapping
    (``yaml.safe_load`` keeps the last), no over-long integer, and with aliases expanded no
    cycle, at most MAX_VALUES nodes and MAX_DEPTH levels. Iterative: the graph can be deep."""
    def fail(node, name: str, message: str):
        raise ConfigError(message, source, name or None, node.start_mark.line + 1)

    size: dict[int, int] = {}
    height: dict[int, int] = {}
    walking: set[int] = set()  # the current node's ancestors: an alias to one is a cycle
    stack = [(root, "", False)]
    while stack:
        node, name, done = stack.pop()
        children = _yaml_children(node)
        if done:
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            height[id(node)] = 1 + max((height[id(c)] for c in children), default=0)
            walking.discard(id(node))
            if size[id(node)] > MAX_VALUES:
                fail(node, name, f"more than {MAX_VALUES:,} values once YAML aliases are expanded")
            if height[id(node)] > MAX_DEPTH:
                fail(node, name, f"nested deeper than {MAX_DEPTH} levels once YAML aliases are expanded")
            continue
        if id(node) in walking:
            fail(node, name, "a YAML alias refers to a node that contains it (a recursive structure)")
        if id(node) in size:  # an alias to a node already checked
            continue
        if node.id == "scalar" and node.tag.endswith(":int") and len(node.value) > MAX_DIGITS:
            fail(node, name, f"integer of {len(node.value):,} characters; at most {MAX_DIGITS} digits are read")
        walking.add(id(node))
        stack.append((node, name, True))
        if node.id == "mapping":
            first: dict[str, int] = {}
            for key, value in node.value:
                label = name
                if key.id == "scalar":
                    label = f"{name}.{key.value}" if name else key.value
                    if key.value == "<<":
                        fail(key, name, "YAML merge keys (<<) are not read; write the keys out")
                    if key.value in first:
                        fail(key, label, f"duplicate key (first on line {first[key.value]})")
                    first[key.value] = key.start_mark.line + 1
                stack += [(key, name, False), (value, label, False)]
        else:
            stack += [(child, name, False) for child in children]


class _Bounded(yaml.composer.Composer):
    """PyYAML's composer (recursive) stopped where nesting passes MAX_DEPTH or the nodes pass
    MAX_VALUES, not after a megabyte of them."""

    source = ""
    depth = nodes = 0

    def compose_node(self, parent, index):
        self.depth, self.nodes = self.depth + 1, self.nodes + 1
        try:
            line = self.peek_event().start_mark.line + 1
            if self.depth > MAX_DEPTH:
                raise ConfigError(f"nested deeper than {MAX_DEPTH} levels", self.source, None, line)
            if self.nodes > MAX_VALUES:
                raise ConfigError(f"more than {MAX_VALUES:,} values, so not a model config", self.source, None, line)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Core(yaml.resolver.BaseResolver):
    """YAML 1.2's core schema in place of PyYAML's YAML 1.1 resolution: ``012`` is 12 (not octal 10),
    ``1:00`` a string (not 60 in base 60), ``1e6`` a float, ``yes``/``on`` strings; merge keys are
    refused by :func:`_check_yaml`."""


for _tag, _pattern, _first in (
        ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
        ("null", r"~|null|Null|NULL|", "~nN"),
        ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
        ("float", r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
         "-+.0123456789")):
    _Core.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), [*_first, ""])


def _core_int(loader: yaml.SafeLoader, node) -> int:
    """An integer as YAML 1.2 reads it: decimal (leading zeros too), ``0o`` octal, ``0x`` hex."""
    text = loader.construct_scalar(node)
    base = {"0o": 8, "0x": 16}.get(text[:2], 10)
    try:
        return int(text[2:] if base != 10 else text, base)
    except ValueError:  # an explicit !!int on other text
        raise yaml.constructor.ConstructorError(None, None, f"not an integer: {text[:40]!r}",
                                                node.start_mark) from None


class _PyLoader(_Bounded, _Core, yaml.SafeLoader):
    """``yaml.safe_load``'s loader, bounded and with YAML 1.2 resolution: PyYAML's own scanner and
    parser, in Python."""


_LOADERS: tuple[type[yaml.SafeLoader], ...] = (_PyLoader,)
if yaml.__with_libyaml__:  # PyYAML's wheels include libyaml
    class _LibYAMLLoader(_Bounded, _Core, yaml.CSafeLoader):
        """The same with libyaml's scanner and parser beneath, ten times faster; the nodes are
        still composed (and bounded), resolved and constructed by PyYAML."""

        def __init__(self, text: str) -> None:
            yaml.CSafeLoader.__init__(self, text)
            yaml.composer.Composer.__init__(self)  # CSafeLoader composes in C, without it

    _LOADERS += (_LibYAMLLoader,)
for _loader in _LOADERS:
    _loader.add_constructor("tag:yaml.org,2002:int", _core_int)


def _read(loader: _Bounded, source: str) -> tuple[Any, dict[str, int]]:
    loader.source = source
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _check_yaml(node, source)
        return loader.construct_document(node), _key_lines(node)
    finally:
        loader.dispose()


def _key_lines(root) -> dict[str, int]:
    """The line of each key reached through mappings alone, by its dotted path (``calibration.gemm_m0``),
    from the composed nodes' marks (checked: no cycle, bounded); an item of a list has no path of its own.
    A top-level key is never shadowed by a nested path of the same spelling (``a.b`` beside ``a: {b: }``)."""
    lines: dict[str, int] = {}
    stack = [(root, "")]
    while stack:
        node, prefix = stack.pop()
        if node.id != "mapping":
            continue
        for key, value in node.value:
            if key.id == "scalar":
                lines.setdefault(prefix + key.value, key.start_mark.line + 1)
                stack.append((value, prefix + key.value + "."))
    return lines


def read_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """The document and the line of each key, nested ones by dotted path (:func:`~analysis.errors.key_line`
    finds one). ``yaml.safe_load`` in three steps:
    compose the node graph (bounded), check it, construct it. A document libyaml refuses is read
    again by PyYAML's own parser, so an error is worded the same whether libyaml is there or not."""
    if yaml.__with_libyaml__:
        try:
            return _read(_LibYAMLLoader(text), source)
        except yaml.YAMLError:
            pass
    try:
        return _read(_PyLoader(text), source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in problem:
            raise ConfigError("YAML tags that construct objects are not allowed (plain YAML only)",
                              source, None, line) from None
        raise ConfigError(f"not valid YAML: {problem}", source, None, line) from None


def read_json(text: str, source: str) -> Any:
    """JSON under the bounds YAML gets: duplicate keys (Python's reader keeps the last), integer
    length and nesting are errors."""
    import json  # here, not at the top: only a config.json pays its import at start-up (DESIGN section 6)

    def mapping(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError("duplicate key", source, key)
            out[key] = value
        return out

    def integer(digits: str) -> int:
        if len(digits) > MAX_DIGITS:
            raise ConfigError(f"integer of {len(digits):,} characters; at most {MAX_DIGITS} digits are read",
                              source)
        return int(digits)

    too_deep = ConfigError(f"nested deeper than {MAX_DEPTH} levels", source)
    try:
        raw = json.loads(text, object_pairs_hook=mapping, parse_int=integer)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg}", source, None, exc.lineno) from None
    except RecursionError:  # deeper than Python's own limit: the C reader recurses per level
        raise too_deep from None
    stack = [(raw, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise too_deep
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack += [(item, depth + 1) for item in items]
    return raw
