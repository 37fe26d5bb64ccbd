"""ConfigError: the one exception for bad user input in ``analysis`` (the CLI maps it to exit 2)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A user-facing problem with a model config: one line, naming file, key and line."""

    def __init__(self, message: str, source: str | None = None, key: str | None = None,
                 line: int | None = None):
        self.message, self.source, self.key, self.line = message, source, key, line
        where = "" if source is None else source + (f":{line}" if line is not None else "") + ": "
        super().__init__(where + (f"key '{key}': " if key else "") + message)
