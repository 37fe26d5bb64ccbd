"""ModelConfig: one flat, frozen description of a decoder-only transformer.

Fields are exactly the YAML keys (DESIGN.md section 2, README "Config keys"); values a user
may omit are ``None`` or a documented default, and everything derived from them (KV heads,
head size, widths, expert width, the layer plan) is computed, never a field that gets
rewritten.

Validation is driven by the dataclass fields: every field carries its own check in its
metadata, so a key exists in YAML exactly when it exists here and can never be silently
dropped. Loading reads YAML with ``yaml.safe_load`` only. Every problem with user input is a
:class:`ConfigError` naming the file, the key and, where known, the YAML line.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import ConfigError
from .variants import ACTIVATIONS, NORMS, POSITIONS

NORM_PLACEMENTS = ("pre", "post", "sandwich", "post_branch")
ATTENTION_KINDS = ("mha", "mla")  # the descriptors: analysis.attention.ATTENTION (a test keeps them equal)
LAYER_TYPES = ("full", "sliding")
QK_NORMS = ("none", "head", "full")
DTYPE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
FLOAT_DTYPES = ("fp32", "bf16", "fp16")  # what activations, caches and compute can be in


def _suggest(key: str, choices) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class _Checker:
    """Raises ConfigError for one file; ``prefix`` names the enclosing mapping (``moe.``)."""

    def __init__(self, source: str | None, lines: dict[str, int], prefix: str = ""):
        self.source, self.lines, self.prefix = source, lines, prefix

    def fail(self, key: str | None, message: str):
        """Raise for ``key`` (``moe.step`` names a nested key; its line is that of ``moe``)."""
        full = self.prefix + key if key else None
        line = self.lines.get(full.split(".")[0]) if full else None
        raise ConfigError(message, self.source, full, line)

    def nested(self, key: str) -> "_Checker":
        return _Checker(self.source, self.lines, self.prefix + key + ".")


# -- per-field checks: (checker, key, value) -> the stored value ---------------------------

Check = Callable[[_Checker, str, Any], Any]


def _int(minimum: int = 1) -> Check:
    def check(c: _Checker, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            c.fail(key, f"must be an integer, got {value!r}")
        if value < minimum:
            c.fail(key, f"must be >= {minimum}, got {value}")
        return value
    return check


def _optional(inner: Check) -> Check:
    def check(c: _Checker, key: str, value: Any) -> Any:
        return None if value is None else inner(c, key, value)
    return check


def _bool(c: _Checker, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        c.fail(key, f"must be true or false, got {value!r}")
    return value


def _enum(choices) -> Check:
    choices = tuple(choices)

    def check(c: _Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            c.fail(key, f"unknown value {value!r}{_suggest(str(value), choices)}; "
                        f"expected one of: {', '.join(choices)}")
        return value
    return check


def _text(required: bool) -> Check:
    def check(c: _Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or (required and not value.strip()):
            c.fail(key, f"must be a non-empty string, got {value!r}")
        return value
    return check


def _number(maximum: float = math.inf) -> Check:
    """A finite positive number (at most ``maximum``); also YAML 1.1's string reading of ``1e6``."""
    def check(c: _Checker, key: str, value: Any) -> float:
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and 0 < number <= maximum):
            bound = "" if maximum == math.inf else f" at most {maximum:g}"
            c.fail(key, f"must be a positive number{bound}, got {value!r}")
        return number
    return check


def _pattern(inner: Check) -> Check:
    """A non-empty list, repeated cyclically over the layers; stored as a tuple."""
    def check(c: _Checker, key: str, value: Any) -> tuple:
        if not isinstance(value, list) or not value:
            c.fail(key, f"must be a non-empty list, got {value!r}")
        return tuple(inner(c, key, v) for v in value)
    return check


def _one_of(*values: int) -> Check:
    def check(c: _Checker, key: str, value: Any) -> int:
        if type(value) is not int or value not in values:
            c.fail(key, f"must be {' or '.join(map(str, values))}, got {value!r}")
        return value
    return check


def _qk_norm(c: _Checker, key: str, value: Any) -> str:
    """``true`` is ``head`` (per head, Qwen 3), ``false`` is ``none``; ``full``: over the whole
    q and k projections (OLMo 2)."""
    if isinstance(value, bool):
        return "head" if value else "none"
    return _enum(QK_NORMS)(c, key, value)


def _mapping(cls) -> Check:
    def check(c: _Checker, key: str, value: Any) -> Any:
        return None if value is None else build(cls, value, c.nested(key))
    return check


def _key(check: Check, default: Any = dataclasses.MISSING) -> Any:
    return field(default=default, metadata={"check": check})


@dataclass(frozen=True)
class MoEConfig:
    """Mixture of experts in place of the MLP of layer ``i`` when ``i >= first_dense_layers``
    and ``(i + 1) % step == 0``; the other layers keep a dense MLP of width ``d_ff``."""

    num_experts: int = _key(_int())
    experts_per_token: int = _key(_int())
    expert_d_ff: int | None = _key(_optional(_int()), None)  # None: the model's d_ff
    shared_experts: int = _key(_int(0), 0)  # always-active experts
    shared_expert_d_ff: int | None = _key(_optional(_int()), None)  # None: the expert width
    shared_expert_gate: bool = _key(_bool, False)  # sigmoid(x @ w), w: d -> 1 (Qwen2-MoE)
    first_dense_layers: int = _key(_int(0), 0)  # DeepSeek: the first 1 or 3 layers are dense
    step: int = _key(_int(), 1)  # every step-th layer is MoE (Qwen-MoE's decoder_sparse_step)
    router_bias: bool = _key(_bool, False)  # GPT-OSS
    expert_bias: bool = _key(_bool, False)  # biases on every expert matrix (GPT-OSS)

    def is_moe_layer(self, i: int) -> bool:
        return i >= self.first_dense_layers and (i + 1) % self.step == 0


@dataclass(frozen=True)
class MLAConfig:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2)."""

    kv_lora_rank: int = _key(_int())  # the compressed KV latent per token
    qk_nope_head_dim: int = _key(_int())  # per-head query/key size without positions
    qk_rope_head_dim: int = _key(_int())  # per-head query size with RoPE; one shared rope key
    v_head_dim: int = _key(_int())
    q_lora_rank: int | None = _key(_optional(_int()), None)  # None: a full-rank query projection


@dataclass(frozen=True)
class ModelConfig:
    name: str = _key(_text(True))
    vocab_size: int = _key(_int())
    context_length: int = _key(_int())
    d_model: int = _key(_int())
    n_layers: int = _key(_int())
    n_heads: int = _key(_int())
    d_ff: int = _key(_int())
    n_kv_heads: int | None = _key(_optional(_int()), None)
    head_dim: int | None = _key(_optional(_int()), None)
    activation: str = _key(_enum(ACTIVATIONS), "gelu")
    norm: str = _key(_enum(NORMS), "layernorm")
    norm_bias: bool = _key(_bool, True)  # layernorm only
    norm_weight: bool = _key(_bool, True)  # false: a norm without parameters (OLMo 1)
    norm_placement: str = _key(_enum(NORM_PLACEMENTS), "pre")
    parallel_block: bool = _key(_bool, False)
    parallel_norms: int = _key(_one_of(1, 2), 1)  # 1: one norm feeds both branches (GPT-J); 2: NeoX
    final_norm: bool = _key(_bool, True)
    qk_norm: str = _key(_qk_norm, "none")
    position: str = _key(_enum(POSITIONS), "learned")
    rope_theta: float = _key(_number(), 10000.0)
    rotary_fraction: float = _key(_number(1.0), 1.0)  # share of each head's dims RoPE rotates
    rope_layers: tuple[bool, ...] | None = _key(_optional(_pattern(_bool)), None)  # false: NoPE layer
    relative_buckets: int = _key(_int(2), 32)  # T5 relative-position buckets (shared by all layers)
    relative_max_distance: int = _key(_int(), 128)
    qkv_bias: bool = _key(_bool, False)
    out_bias: bool = _key(_bool, False)
    mlp_bias: bool = _key(_bool, False)
    lm_head_bias: bool = _key(_bool, False)
    tie_embeddings: bool = _key(_bool, False)
    embedding_scale: float | None = _key(_optional(_number()), None)  # Gemma: sqrt(d_model)
    sliding_window: int | None = _key(_optional(_int()), None)
    layer_types: tuple[str, ...] | None = _key(_optional(_pattern(_enum(LAYER_TYPES))), None)
    attention: str = _key(_enum(ATTENTION_KINDS), "mha")
    mla: MLAConfig | None = _key(_mapping(MLAConfig), None)
    attention_sinks: bool = _key(_bool, False)  # one learned logit per head joins the softmax
    attn_logit_softcap: float | None = _key(_optional(_number()), None)  # Gemma 2: 50
    final_logit_softcap: float | None = _key(_optional(_number()), None)  # Gemma 2: 30
    moe: MoEConfig | None = _key(_mapping(MoEConfig), None)
    dtype: str = _key(_enum(DTYPE_BITS), "bf16")
    description: str = _key(_text(False), "")

    # -- derived values ------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def head_size(self) -> int:
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def q_width(self) -> int:
        """Width of the query projection output, h * hd (MHA)."""
        return self.n_heads * self.head_size

    @property
    def kv_width(self) -> int:
        """Width of each of the key and value projection outputs, g * hd (MHA)."""
        return self.kv_heads * self.head_size

    @property
    def rotary_dims(self) -> int:
        """Dimensions of each MHA head that RoPE rotates: ``int(head_size * rotary_fraction)``."""
        return int(self.head_size * self.rotary_fraction)

    @property
    def gated(self) -> bool:
        return ACTIVATIONS[self.activation].gated

    @property
    def expert_width(self) -> int:
        if self.moe is None or self.moe.expert_d_ff is None:
            return self.d_ff
        return self.moe.expert_d_ff

    @property
    def shared_expert_width(self) -> int:
        if self.moe is None or self.moe.shared_expert_d_ff is None:
            return self.expert_width
        return self.moe.shared_expert_d_ff

    @property
    def norm_has_bias(self) -> bool:
        return self.norm == "layernorm" and self.norm_bias

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


# -- validation ---------------------------------------------------------------------

def _required(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING)


REQUIRED = _required(ModelConfig)


def build(cls, raw: Any, check: _Checker):
    """``cls`` from a mapping, each value through its field's check (unknown and missing keys
    are errors)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not isinstance(raw, dict):
        if check.prefix:  # a nested mapping (moe, mla): the error names the key holding it
            _Checker(check.source, check.lines).fail(check.prefix[:-1], f"must be a mapping, got {raw!r}")
        check.fail(None, f"expected a mapping of config keys, got {type(raw).__name__}")
    for key in raw:
        if not isinstance(key, str) or key not in fields:
            check.fail(str(key), "unknown key" + _suggest(str(key), fields))
    for key in _required(cls):
        if key not in raw:
            check.fail(key, "missing required key")
    return cls(**{k: fields[k].metadata["check"](check, k, v) for k, v in raw.items()})


def from_dict(raw: Any, source: str | None = None, lines: dict[str, int] | None = None) -> ModelConfig:
    """Validate a mapping of YAML keys and build a ModelConfig (or raise ConfigError)."""
    check = _Checker(source, lines or {})
    cfg = build(ModelConfig, raw, check)
    _cross_checks(cfg, check)
    return cfg


def _cross_checks(cfg: ModelConfig, check: _Checker) -> None:
    """Rules between keys; each names the key a user would change."""
    mla = cfg.attention == "mla"
    if mla and cfg.mla is None:
        check.fail("attention", "mla needs an 'mla' mapping (kv_lora_rank, qk_nope_head_dim, "
                          "qk_rope_head_dim, v_head_dim)")
    if not mla and cfg.mla is not None:
        check.fail("mla", "given, but attention is not 'mla'")
    if mla:
        for key, bad in (("n_kv_heads", cfg.n_kv_heads is not None), ("head_dim", cfg.head_dim is not None),
                         ("qk_norm", cfg.qk_norm != "none"), ("rotary_fraction", cfg.rotary_fraction != 1)):
            if bad:
                check.fail(key, "does not apply to attention: mla (its sizes are under 'mla')")
        if cfg.position == "rope" and cfg.mla.qk_rope_head_dim % 2:
            check.fail("mla.qk_rope_head_dim", f"RoPE needs an even size, got {cfg.mla.qk_rope_head_dim}")
    else:
        if cfg.n_heads % cfg.kv_heads:
            check.fail("n_kv_heads", f"must divide n_heads ({cfg.n_heads}), got {cfg.kv_heads}")
        if cfg.head_dim is None and cfg.d_model % cfg.n_heads:
            check.fail("n_heads", f"must divide d_model ({cfg.d_model}) when head_dim is not given, "
                                  f"got {cfg.n_heads}")
        if cfg.position == "rope" and (cfg.rotary_dims % 2 or cfg.rotary_dims == 0):
            key = "head_dim" if cfg.rotary_fraction == 1 else "rotary_fraction"
            check.fail(key, f"RoPE needs an even, non-zero number of rotated dimensions, got "
                            f"int({cfg.head_size} * {cfg.rotary_fraction:g}) = {cfg.rotary_dims}")
    if cfg.relative_max_distance <= cfg.relative_buckets // 2:
        check.fail("relative_max_distance", f"must exceed relative_buckets // 2 "
                                            f"({cfg.relative_buckets // 2}), got {cfg.relative_max_distance}")
    if cfg.parallel_block and cfg.norm_placement in ("post", "post_branch"):
        check.fail("norm_placement", "parallel_block works with 'pre' or 'sandwich', "
                                     f"not {cfg.norm_placement!r}")
    if cfg.norm == "rmsnorm" and not cfg.norm_weight:
        check.fail("norm_weight", "false applies to layernorm only")
    if cfg.layer_types and "sliding" in cfg.layer_types and cfg.sliding_window is None:
        check.fail("layer_types", "has 'sliding' layers but sliding_window is not set")
    if cfg.layer_types and "sliding" not in cfg.layer_types and cfg.sliding_window is not None:
        check.fail("sliding_window", "is set but layer_types has no 'sliding' layer")
    if cfg.rope_layers is not None and cfg.position != "rope":
        check.fail("rope_layers", f"applies to position: rope, not {cfg.position!r}")
    moe = cfg.moe
    if moe is not None:
        if moe.experts_per_token > moe.num_experts:
            check.fail("moe", f"experts_per_token ({moe.experts_per_token}) exceeds "
                              f"num_experts ({moe.num_experts})")
        for key in ("shared_expert_gate", "shared_expert_d_ff"):
            if getattr(moe, key) not in (None, False) and not moe.shared_experts:
                check.fail(f"moe.{key}", "needs shared_experts >= 1")
        if not any(moe.is_moe_layer(i) for i in range(cfg.n_layers)):
            check.fail("moe", f"no layer is MoE (first_dense_layers {moe.first_dense_layers}, "
                              f"step {moe.step}, {cfg.n_layers} layers)")


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


def _bundled_dir() -> Path:
    """The bundled configs' folder, ``model_configs`` beside ``analysis`` both in the repository
    and installed (``llmcalc/model_configs``). Not importlib.resources: it costs 13 ms of
    startup (it imports tempfile, shutil, ...), and llmcalc is never imported from a zip."""
    return Path(__file__).resolve().parent.parent / "model_configs"


def bundled_names() -> list[str]:
    files = _bundled_dir().iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".yaml"))


def load_bundled(name: str) -> ModelConfig:
    res = _bundled_dir() / f"{name}.yaml"
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


__all__ = ["ModelConfig", "MoEConfig", "MLAConfig", "ConfigError", "from_dict", "load_model", "load_path",
           "load_text", "bundled_names", "load_bundled", "DTYPE_BITS"]
