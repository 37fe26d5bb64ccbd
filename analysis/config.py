"""ModelConfig: one flat, frozen description of a decoder-only transformer.

Fields are exactly the YAML keys (DESIGN.md section 2); values a user may omit are
``None`` or a documented default, and everything derived from them (KV heads, head
size, widths, expert width) is a property, never a field that gets rewritten.

Loading reads YAML with ``yaml.safe_load`` only. Every problem with user input is a
:class:`ConfigError` naming the file, the key and, where known, the YAML line.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

ACTIVATIONS = ("relu", "gelu", "silu", "sqrelu", "swiglu", "geglu", "reglu")
GATED = ("swiglu", "geglu", "reglu")
NORMS = ("layernorm", "rmsnorm")
NORM_PLACEMENTS = ("pre", "post", "sandwich")
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "relative", "none")
DTYPE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
FLOAT_DTYPES = ("fp32", "bf16", "fp16")  # what activations, caches and compute can be in


class ConfigError(ValueError):
    """A user-facing problem with a model config: one line, naming file, key and line."""

    def __init__(self, message: str, source: str | None = None, key: str | None = None,
                 line: int | None = None):
        self.message, self.source, self.key, self.line = message, source, key, line
        where = "" if source is None else source + (f":{line}" if line is not None else "") + ": "
        super().__init__(where + (f"key '{key}': " if key else "") + message)


@dataclass(frozen=True)
class MoEConfig:
    """Mixture of experts replacing every layer's MLP (router has no bias)."""

    num_experts: int
    experts_per_token: int
    expert_d_ff: int | None = None  # width of each expert; None: the model's d_ff
    shared_experts: int = 0  # always-active experts of the same width


@dataclass(frozen=True)
class ModelConfig:
    name: str
    vocab_size: int
    context_length: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    activation: str = "gelu"
    norm: str = "layernorm"
    norm_bias: bool = True
    norm_placement: str = "pre"
    parallel_block: bool = False
    parallel_norms: int = 1  # 1: one norm feeds both branches (GPT-J); 2: one each (NeoX)
    final_norm: bool = True
    qk_norm: bool = False
    position: str = "learned"
    rope_theta: float = 10000.0
    relative_buckets: int = 32  # T5 relative-position buckets (shared by all layers)
    relative_max_distance: int = 128
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    tie_embeddings: bool = False
    sliding_window: int | None = None
    moe: MoEConfig | None = None
    dtype: str = "bf16"
    description: str = ""

    # -- derived values ------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def head_size(self) -> int:
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def q_width(self) -> int:
        """Width of the query projection output, h * hd."""
        return self.n_heads * self.head_size

    @property
    def kv_width(self) -> int:
        """Width of each of the key and value projection outputs, g * hd."""
        return self.kv_heads * self.head_size

    @property
    def gated(self) -> bool:
        return self.activation in GATED

    @property
    def expert_width(self) -> int:
        if self.moe is None or self.moe.expert_d_ff is None:
            return self.d_ff
        return self.moe.expert_d_ff

    @property
    def norm_has_bias(self) -> bool:
        return self.norm == "layernorm" and self.norm_bias

    def window(self, kv_len: int) -> int:
        """Keys one query can see out of ``kv_len``: bounded by the sliding window."""
        return kv_len if self.sliding_window is None else min(kv_len, self.sliding_window)

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


# -- validation ---------------------------------------------------------------------

_FIELDS = {f.name: f for f in dataclasses.fields(ModelConfig)}
_MOE_FIELDS = {f.name: f for f in dataclasses.fields(MoEConfig)}
REQUIRED = tuple(n for n, f in _FIELDS.items()
                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
_ENUMS = {"activation": ACTIVATIONS, "norm": NORMS, "norm_placement": NORM_PLACEMENTS,
          "position": POSITIONS, "dtype": tuple(DTYPE_BITS)}
_INTS = {"vocab_size", "context_length", "d_model", "n_layers", "n_heads", "d_ff", "n_kv_heads",
         "head_dim", "relative_buckets", "relative_max_distance", "sliding_window"}
_BOOLS = {"norm_bias", "parallel_block", "final_norm", "qk_norm", "qkv_bias", "out_bias",
          "mlp_bias", "lm_head_bias", "tie_embeddings"}


def _suggest(key: str, choices) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class _Checker:
    def __init__(self, source: str | None, lines: dict[str, int]):
        self.source, self.lines = source, lines

    def fail(self, key: str | None, message: str):
        raise ConfigError(message, self.source, key, self.lines.get(key) if key else None)

    def positive_int(self, key: str, value: Any, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be an integer, got {value!r}")
        if value < minimum:
            self.fail(key, f"must be >= {minimum}, got {value}")
        return value


def _positive_number(check: _Checker, key: str, value: Any) -> float:
    """A finite positive number; also YAML 1.1's string reading of ``1e6``."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        check.fail(key, f"must be a positive number, got {value!r}")
    return number


def from_dict(raw: Any, source: str | None = None, lines: dict[str, int] | None = None) -> ModelConfig:
    """Validate a mapping of YAML keys and build a ModelConfig (or raise ConfigError)."""
    check = _Checker(source, lines or {})
    if not isinstance(raw, dict):
        check.fail(None, f"expected a mapping of config keys, got {type(raw).__name__}")
    for key in raw:
        if not isinstance(key, str) or key not in _FIELDS:
            check.fail(str(key), "unknown key" + _suggest(str(key), _FIELDS))
    for key in REQUIRED:
        if key not in raw:
            check.fail(key, "missing required key")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _INTS:
            if value is None and _FIELDS[key].default is None:
                continue
            values[key] = check.positive_int(key, value)
        elif key in _BOOLS:
            if not isinstance(value, bool):
                check.fail(key, f"must be true or false, got {value!r}")
            values[key] = value
        elif key in _ENUMS:
            if value not in _ENUMS[key]:
                choices = ", ".join(_ENUMS[key])
                check.fail(key, f"unknown value {value!r}{_suggest(str(value), _ENUMS[key])}; "
                                f"expected one of: {choices}")
            values[key] = value
        elif key in ("name", "description"):
            if not isinstance(value, str) or (key == "name" and not value.strip()):
                check.fail(key, f"must be a non-empty string, got {value!r}")
            values[key] = value
        elif key == "rope_theta":
            values[key] = _positive_number(check, key, value)
        elif key == "parallel_norms":
            if type(value) is not int or value not in (1, 2):
                check.fail(key, f"must be 1 or 2, got {value!r}")
            values[key] = value
        elif key == "moe":
            if value is not None:
                values[key] = _moe(value, check)
    cfg = ModelConfig(**values)
    if cfg.n_heads % cfg.kv_heads:
        check.fail("n_kv_heads", f"must divide n_heads ({cfg.n_heads}), got {cfg.kv_heads}")
    if cfg.head_dim is None and cfg.d_model % cfg.n_heads:
        check.fail("n_heads", f"must divide d_model ({cfg.d_model}) when head_dim is not given, "
                              f"got {cfg.n_heads}")
    if cfg.relative_buckets < 2:
        check.fail("relative_buckets", f"must be >= 2, got {cfg.relative_buckets}")
    if cfg.relative_max_distance <= cfg.relative_buckets // 2:
        check.fail("relative_max_distance", f"must exceed relative_buckets // 2 "
                                            f"({cfg.relative_buckets // 2}), got {cfg.relative_max_distance}")
    if cfg.parallel_block and cfg.norm_placement == "post":
        check.fail("norm_placement", "parallel_block works with 'pre' or 'sandwich', not 'post'")
    if cfg.position == "rope" and cfg.head_size % 2:
        check.fail("head_dim", f"RoPE needs an even head size, got {cfg.head_size}")
    return cfg


def _moe(value: Any, check: _Checker) -> MoEConfig:
    if not isinstance(value, dict):
        check.fail("moe", f"must be a mapping, got {value!r}")
    for key in value:
        if key not in _MOE_FIELDS:
            check.fail("moe", f"unknown key '{key}'" + _suggest(str(key), _MOE_FIELDS))
    for key in ("num_experts", "experts_per_token"):
        if key not in value:
            check.fail("moe", f"missing required key '{key}'")
    ints = {}
    for key, v in value.items():
        if key == "expert_d_ff" and v is None:
            continue
        try:
            ints[key] = check.positive_int("moe", v, minimum=0 if key == "shared_experts" else 1)
        except ConfigError as exc:
            raise ConfigError(exc.message, exc.source, f"moe.{key}", exc.line) from None
    moe = MoEConfig(**ints)
    if moe.experts_per_token > moe.num_experts:
        check.fail("moe", f"experts_per_token ({moe.experts_per_token}) exceeds "
                          f"num_experts ({moe.num_experts})")
    return moe


# -- loading ------------------------------------------------------------------------

def _key_lines(text: str, source: str) -> dict[str, int]:
    """1-based line of each top-level key, from the node graph (no objects constructed).

    Duplicate keys are an error: ``yaml.safe_load`` would silently keep the last one.
    """
    import yaml

    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(node, yaml.MappingNode):
        return {}
    lines: dict[str, int] = {}
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode):
            if key.value in lines:
                raise ConfigError(f"duplicate key (first on line {lines[key.value]})", source,
                                  key.value, key.start_mark.line + 1)
            lines[key.value] = key.start_mark.line + 1
    return lines


def _load_json(text: str, source: str) -> ModelConfig:
    """JSON is not quite a subset of YAML 1.1 (``1e6``, tabs): read it as JSON."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg}", source, None, exc.lineno) from None
    if isinstance(raw, dict) and "model_type" in raw and "name" not in raw:
        from .hf import from_hf_config

        return from_dict(from_hf_config(raw, source), source)
    return from_dict(raw, source)


def load_text(text: str, source: str) -> ModelConfig:
    import yaml

    if source.endswith(".json"):
        return _load_json(text, source)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in problem:
            raise ConfigError("YAML tags that construct objects are not allowed (plain YAML only)",
                              source, None, line) from None
        raise ConfigError(f"not valid YAML: {problem}", source, None, line) from None
    return from_dict(raw, source, _key_lines(text, source))


def load_path(path: Path) -> ModelConfig:
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", source) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not a YAML or JSON file (not UTF-8 text)", source) from None
    if "\x00" in text:
        raise ConfigError("not a YAML or JSON file (binary data)", source)
    return load_text(text, source)


def bundled_names() -> list[str]:
    files = resources.files("llmcalc.model_configs").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".yaml"))


def load_bundled(name: str) -> ModelConfig:
    res = resources.files("llmcalc.model_configs") / f"{name}.yaml"
    return load_text(res.read_text(encoding="utf-8"), f"model_configs/{name}.yaml")


def load_model(spec: str) -> ModelConfig:
    """A bundled name (``gpt2-xl``), a YAML path, or a Hugging Face ``config.json`` path."""
    names = bundled_names()
    if spec in names:
        return load_bundled(spec)
    path = Path(spec)
    if path.exists() or spec.endswith((".yaml", ".yml", ".json")) or "/" in spec:
        if not path.exists():
            raise ConfigError("no such file", spec)
        return load_path(path)
    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"unknown model '{spec}'{hint} (`llmcalc models` lists them)")


__all__ = ["ModelConfig", "MoEConfig", "ConfigError", "from_dict", "load_model", "load_path",
           "load_text", "bundled_names", "load_bundled", "DTYPE_BITS"]
