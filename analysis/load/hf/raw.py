"""Reading one Hugging Face config mapping as transformers' config class reads it (:class:`Raw`),
shared by the language models' mappers (:mod:`.hf`) and the vision towers' (:mod:`.vision`)."""

from __future__ import annotations

from typing import Any, NoReturn

from ...errors import ConfigError, brief
from ...model.sizes import MAX_INT
from .defaults import Default

# transformers' activation names -> llmcalc's, and the gated form of each that has one
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu",
                "gelu_python": "gelu", "relu": "relu", "silu": "silu", "swish": "silu", "relu2": "sqrelu"}
ACTIVATIONS["xielu"] = "xielu"  # transformers' XIELUActivation: its learned scalars are mlp/act (Apertus)
GATED = {"gelu": "geglu", "relu": "reglu", "silu": "swiglu"}
GATED["sqrelu"] = "sqreglu"  # relu2 on the gate (BitNet)


class Raw:
    """The config mapping of one file, read as transformers' config class for its ``model_type``
    reads it: a key left out has the class's default (``defaults``, :mod:`.defaults`), a null
    is None (a null transformers refuses is refused before, by :func:`_read`). Records which keys
    a mapper read."""

    def __init__(self, raw: dict[str, Any], source: str, defaults: dict[str, Default], prefix: str = ""):
        self.raw, self.source, self.defaults, self.prefix = raw, source, defaults, prefix
        self.read: set[str] = set()

    def fail(self, key: str, message: str) -> NoReturn:
        """ConfigError naming ``key`` (under ``prefix``, for a nested mapping: ``vision_config.``)."""
        raise ConfigError(message, self.source, self.prefix + key)

    def has(self, key: str) -> bool:
        """Whether the file gives ``key`` a value (not null)."""
        self.read.add(key)
        return self.raw.get(key) is not None

    def get(self, key: str) -> Any:
        """The file's value; absent: the config class's default (None where it has none)."""
        self.read.add(key)
        if key in self.raw:
            return self.raw[key]
        default = self.defaults.get(key)
        return None if default is None else default.value

    def flag(self, key: str) -> bool:
        """A boolean; None is false, as transformers' ``if config.key`` reads it. A string such
        as ``"false"`` is an error, not true."""
        value = self.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, got {brief(value)}")
        return value

    def maybe_size(self, key: str, minimum: int = 1, maximum: int = MAX_INT) -> int | None:
        """An integer a mapper computes with, or None (where transformers derives one, as
        ``num_key_value_heads``, or goes without, as ``sliding_window``); checked here, before
        arithmetic on a string, ``{}`` or ``false``, or a layer list of 10^40 entries."""
        value = self.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not minimum <= value <= maximum):
            self.fail(key, f"must be an integer from {minimum} to {maximum:,}, got {brief(value)}")
        return value

    def size(self, key: str, minimum: int = 1, maximum: int = MAX_INT) -> int:
        """An integer a mapper computes with, which transformers cannot do without."""
        value = self.maybe_size(key, minimum, maximum)
        if value is None:
            self.fail(key, "missing Hugging Face key" if key not in self.raw else "is null, but a value is needed")
        return value

    def ignore(self, *keys: str) -> None:
        """Keys of this family that change no count (listed with its mapper)."""
        self.read.update(keys)

    def activation(self, key: str, gated: bool, names: dict[str, str] = ACTIVATIONS,
                   gated_names: dict[str, str] = GATED) -> str:
        """llmcalc's activation for ``key``'s transformers name (``names``), in its gated form
        (``gated_names``) for a gated MLP; refused, naming the key, where there is none."""
        act = self.get(key)
        base = names.get(act) if isinstance(act, str) else None
        if base is None or (gated and base not in gated_names):  # no gated xIELU
            self.fail(key, f"unsupported activation {brief(act)}")
        return gated_names[base] if gated else base

    def false(self, key: str, why: str) -> None:
        """The key must be absent, null or false (its true value is something llmcalc cannot count)."""
        if self.flag(key):
            self.fail(key, f"True is not supported: {why}")
