"""ModelConfig: one flat, frozen description of a decoder-only transformer.

Fields are exactly the YAML keys (DESIGN.md section 2, README "Config keys"); values a user
may omit are ``None`` or a documented default, and everything derived from them (KV heads,
head size, widths, expert width, the layer plan) is computed, never a field that gets
rewritten.

Validation is driven by the dataclass fields: every field carries its own check in its
metadata, so a key exists in YAML exactly when it exists here and can never be silently
dropped. Loading reads YAML with PyYAML's SafeLoader only, within the bounds of "reading
files" below. Every problem with user input is a :class:`ConfigError` naming the file, the
key and, where known, the YAML line.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import ConfigError, brief
from .variants import ACTIVATIONS, NORMS, POSITIONS

NORM_PLACEMENTS = ("pre", "post", "sandwich", "post_branch")
ATTENTION_KINDS = ("mha", "mla")  # the descriptors: analysis.attention.ATTENTION (a test keeps them equal)
LAYER_TYPES = ("full", "sliding")
QK_NORMS = ("none", "head", "full")
DTYPE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
FLOAT_DTYPES = ("fp32", "bf16", "fp16")  # what activations, caches and compute can be in
# quantized storage formats, described in analysis.quant.FORMATS (a test keeps the names equal)
WEIGHT_FORMATS = ("nf4", "nf4-dq", "fp4", "fp4-dq", "llm-int8", "gptq-int4", "gptq-int8", "awq-int4",
                  "fp8-tensor", "fp8-channel", "fp8-block", "mxfp4")

# Bounds on what a config may hold (README "Bad input"): past them a value is a mistake or an
# attack, and without them it would cost minutes, memory or a silently inexact number.
MAX_INT = 2**53  # every integer: floats hold it exactly, so no derived figure is rounded
MAX_LAYERS = 100_000  # the layer plan is built layer by layer (the deepest real models have ~130)


def _suggest(key: str, choices) -> str:
    import difflib  # only for an error: not imported on every start

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


def _int(minimum: int = 1, maximum: int = MAX_INT) -> Check:
    def check(c: _Checker, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            c.fail(key, f"must be an integer, got {brief(value)}")
        if value < minimum:
            c.fail(key, f"must be >= {minimum}, got {brief(value)}")
        if value > maximum:
            c.fail(key, f"must be at most {maximum:,}, got {brief(value)}")
        return value
    return check


def _optional(inner: Check) -> Check:
    def check(c: _Checker, key: str, value: Any) -> Any:
        return None if value is None else inner(c, key, value)
    return check


def _bool(c: _Checker, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        c.fail(key, f"must be true or false, got {brief(value)}")
    return value


def _enum(choices) -> Check:
    choices = tuple(choices)

    def check(c: _Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            hint = _suggest(value, choices) if isinstance(value, str) else ""
            c.fail(key, f"unknown value {brief(value)}{hint}; "
                        f"expected one of: {', '.join(choices)}")
        return value
    return check


def _text(required: bool) -> Check:
    def check(c: _Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or (required and not value.strip()):
            c.fail(key, f"must be a non-empty string, got {brief(value)}")
        if any(unicodedata.category(ch) == "Cc" for ch in value):
            # an escape sequence or a newline would rewrite the terminal or split a table row
            # (a lone surrogate, from a directory name that is not UTF-8, is escaped on output)
            c.fail(key, f"must be printable text (no control characters), got {brief(value)}")
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
            c.fail(key, f"must be a positive number{bound}, got {brief(value)}")
        return number
    return check


def _pattern(inner: Check) -> Check:
    """A non-empty list, repeated cyclically over the layers; stored as a tuple."""
    def check(c: _Checker, key: str, value: Any) -> tuple:
        if not isinstance(value, list) or not value:
            c.fail(key, f"must be a non-empty list, got {brief(value)}")
        return tuple(inner(c, key, v) for v in value)
    return check


def _names(c: _Checker, key: str, value: Any) -> tuple[str, ...]:
    """A list of names, possibly empty; stored as a tuple."""
    if not isinstance(value, list):
        c.fail(key, f"must be a list, got {brief(value)}")
    return tuple(_text(True)(c, key, v) for v in value)


def _one_of(*values: int) -> Check:
    def check(c: _Checker, key: str, value: Any) -> int:
        if type(value) is not int or value not in values:
            c.fail(key, f"must be {' or '.join(map(str, values))}, got {brief(value)}")
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
    """A model: every config key (README "Config keys"), checked by its field's check; derived sizes below."""

    name: str = _key(_text(True))
    vocab_size: int = _key(_int())
    context_length: int = _key(_int())
    d_model: int = _key(_int())
    n_layers: int = _key(_int(maximum=MAX_LAYERS))
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
    dtype: str = _key(_enum((*DTYPE_BITS, *WEIGHT_FORMATS)), "bf16")  # stored weights: a dtype or a format
    quant_group_size: int | None = _key(_optional(_int()), None)  # a format's block or group (None: its default)
    quant_skip: tuple[str, ...] | None = _key(_optional(_names), None)  # linears kept unquantized
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
            _Checker(check.source, check.lines).fail(check.prefix[:-1], f"must be a mapping, got {brief(raw)}")
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
    if (cfg.quant_group_size is not None or cfg.quant_skip is not None) and cfg.dtype not in WEIGHT_FORMATS:
        check.fail("quant_group_size" if cfg.quant_group_size is not None else "quant_skip",
                   f"applies to a quantized dtype ({', '.join(WEIGHT_FORMATS)}), not {cfg.dtype!r}")
    if cfg.dtype in WEIGHT_FORMATS:
        from .quant import config_problem  # the model's linears, from its layer plan

        problem = config_problem(cfg)
        if problem:
            check.fail(*problem)
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


# -- reading files ------------------------------------------------------------------
# A config is a few kilobytes of plain data. Anything past these bounds is refused with one line
# before it can cost memory, time or Python's recursion limit (README "Bad input").

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
    too_large = f"larger than {MAX_FILE_BYTES:,} bytes, so not a model config (those are a few KB)"
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError("is a directory", source)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("not a regular file (a FIFO, device or socket is never read)", source)
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
                    if key.value in first:
                        fail(key, label, f"duplicate key (first on line {first[key.value]})")
                    first[key.value] = key.start_mark.line + 1
                stack += [(key, name, False), (value, label, False)]
        else:
            stack += [(child, name, False) for child in children]


def _read_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """The document and the line of each top-level key. ``yaml.safe_load`` in three steps:
    compose the node graph (at most MAX_VALUES nodes, no deeper than MAX_DEPTH: PyYAML composes
    recursively), check it, construct it."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = nodes = 0

        def compose_node(self, parent, index):
            self.depth, self.nodes = self.depth + 1, self.nodes + 1
            try:
                line = self.peek_event().start_mark.line + 1
                if self.depth > MAX_DEPTH:
                    raise ConfigError(f"nested deeper than {MAX_DEPTH} levels", source, None, line)
                if self.nodes > MAX_VALUES:  # PyYAML is slow: stop early, not after a megabyte
                    raise ConfigError(f"more than {MAX_VALUES:,} values, so not a model config", source, None, line)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _check_yaml(node, source)
        lines = {k.value: k.start_mark.line + 1 for k, _ in node.value if k.id == "scalar"} \
            if node.id == "mapping" else {}
        return loader.construct_document(node), lines
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in problem:
            raise ConfigError("YAML tags that construct objects are not allowed (plain YAML only)",
                              source, None, line) from None
        raise ConfigError(f"not valid YAML: {problem}", source, None, line) from None
    finally:
        loader.dispose()


def read_json(text: str, source: str) -> Any:
    """JSON under the bounds YAML gets: duplicate keys (Python's reader keeps the last), integer
    length and nesting are errors."""
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


def _from_json(raw: Any, source: str) -> ModelConfig:
    """JSON is not quite a subset of YAML 1.1 (``1e6``, tabs): read it as JSON. A mapping with
    a ``model_type`` and no ``name`` is a Hugging Face config.json."""
    if isinstance(raw, dict) and "model_type" in raw and "name" not in raw:
        from .hf import from_hf_config

        return from_dict(from_hf_config(raw, source), source)
    return from_dict(raw, source)


def load_text(text: str, source: str) -> ModelConfig:
    if source.endswith(".json"):
        return _from_json(read_json(text, source), source)
    raw, lines = _read_yaml(text, source)
    return from_dict(raw, source, lines)


def load_path(path: Path) -> ModelConfig:
    """A YAML or JSON file, or a model directory holding a config.json."""
    path = config_file(path)
    return load_text(read_text(path), str(path))


def _bundled_dir() -> Path:
    """The bundled configs' folder, ``model_configs`` beside ``analysis`` both in the repository
    and installed (``llmcalc/model_configs``). Not importlib.resources: it costs 13 ms of
    startup (it imports tempfile, shutil, ...), and llmcalc is never imported from a zip."""
    return Path(__file__).resolve().parent.parent / "model_configs"


BUNDLED_JSON = "bundled.json"


@functools.cache
def read_bundled(folder: str = "") -> dict[str, dict]:
    """Every bundled YAML of ``model_configs/<folder>`` (the source, with its citations), parsed,
    from its ``bundled.json``: reading it needs no YAML parser, whose import alone is a sixth of
    an analytic command's start. tests/test_bundled.py keeps the two equal (``python
    tests/test_bundled.py`` rewrites the JSON after a YAML changes)."""
    return json.loads((_bundled_dir() / folder / BUNDLED_JSON).read_text(encoding="utf-8"))


def unknown(what: str, spec: str, names: list[str], command: str) -> ConfigError:
    """The error for a name that is not bundled, with the nearest names."""
    import difflib

    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"unknown {what} {brief(spec)}{hint} (`llmcalc {command}` lists them)")


def bundled_names() -> list[str]:
    return sorted(read_bundled())


def load_bundled(name: str) -> ModelConfig:
    return from_dict(read_bundled()[name], f"model_configs/{name}.yaml")


def load_model(spec: str) -> ModelConfig:
    """A bundled name (``gpt2-xl``), a YAML path, a Hugging Face ``config.json`` path, or a
    model directory holding one (a Hugging Face cache snapshot)."""
    names = bundled_names()
    if spec in names:
        return load_bundled(spec)
    if os.path.lexists(spec) or spec.endswith((".yaml", ".yml", ".json")) or "/" in spec or os.sep in spec:
        return load_path(Path(spec))
    raise unknown("model", spec, names, "models")


__all__ = ["ModelConfig", "MoEConfig", "MLAConfig", "ConfigError", "from_dict", "load_model", "load_path",
           "load_text", "read_text", "read_json", "config_file", "bundled_names", "load_bundled", "DTYPE_BITS"]
