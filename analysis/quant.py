"""Quantized weight storage: the formats people deploy, each one byte formula per matrix.

A format stores a quantized matrix ``d_out x d_in`` (``n = d_in * d_out`` values) as packed
codes plus scales (and zeros or code maps) per block or group. Everything it leaves alone stays
in the compute dtype: embeddings, norms, learned vectors, biases, and the linears its defaults
skip (``skip``: breakdown keys or their prefixes; the LM head for all, routers for some).
Each formula counts the tensors a checkpoint of the format holds per matrix (README
"Quantized weights" has the table and the sources):

- ``nf4``, ``fp4`` (bitsandbytes ``Linear4bit``): ``n/2`` bytes of 4-bit codes, one fp32
  absmax per block of 64 values, the 16-entry fp32 code map. ``-dq`` (double quantization,
  QLoRA's default): the absmax as 8-bit codes, one fp32 scale per 256 of them and their
  256-entry fp32 map: ``4 + 8/64 + 32/(64*256)`` bits per value. bitsandbytes also serializes a
  JSON header of about 170 bytes per matrix, not counted;
- ``llm-int8`` (bitsandbytes ``Linear8bitLt``): ``n`` int8 values, one fp32 scale per output row
  (``SCB``) and a one-byte ``weight_format``;
- ``gptq-int4``, ``gptq-int8`` (GPTQ ``QuantLinear``, group g = 128 input rows): ``qweight``
  int32 ``(d_in*bits/32, d_out)``, ``qzeros`` int32 ``(d_in/g, d_out*bits/32)``, ``scales``
  fp16 ``(d_in/g, d_out)``, ``g_idx`` int32 ``(d_in)``;
- ``awq-int4`` (AutoAWQ GEMM, g = 128): ``qweight`` int32 ``(d_in, d_out*bits/32)``, ``qzeros``
  as GPTQ's, ``scales`` fp16 ``(d_in/g, d_out)``;
- ``fp8-tensor``, ``fp8-channel``, ``fp8-block``: ``n`` fp8 values and fp32 scales, one per
  matrix, per output row, or per 128 x 128 block (DeepSeek-V3's ``weight_scale_inv``);
- ``mxfp4`` (OCP microscaling, GPT-OSS): ``n/2`` bytes of E2M1 codes and one E8M0 byte per 32
  values along the input: 4.25 bits per value. GPT-OSS quantizes its experts only.

A partial block or group (``d_in`` not a multiple of it) takes a whole one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .config import ModelConfig
from .inventory import Linear
from .layout import Layer
from .lora import frozen_keys
from .params import count_params
from .plan import layer_plan
from .run import RunSpec, ceil_div, weight_bytes

FP32, FP16, INT32 = 4, 2, 4


def _bnb4(double: bool) -> Callable[[int, int, int], int]:
    def size(d_in: int, d_out: int, group: int) -> int:
        n = d_in * d_out
        blocks = ceil_div(n, group)
        absmax = blocks + ceil_div(blocks, 256) * FP32 + 256 * FP32 if double else blocks * FP32
        return ceil_div(n, 2) + absmax + 16 * FP32
    return size


def _gptq(bits: int) -> Callable[[int, int, int], int]:
    def size(d_in: int, d_out: int, group: int) -> int:
        groups, per = ceil_div(d_in, group), 32 // bits
        return (ceil_div(d_in, per) * d_out + groups * ceil_div(d_out, per) + d_in) * INT32 + groups * d_out * FP16
    return size


def _awq(d_in: int, d_out: int, group: int) -> int:
    groups, cols = ceil_div(d_in, group), ceil_div(d_out, 8)
    return (d_in + groups) * cols * INT32 + groups * d_out * FP16


def _fp8(scales: Callable[[int, int, int], int]) -> Callable[[int, int, int], int]:
    return lambda d_in, d_out, group: d_in * d_out + scales(d_in, d_out, group) * FP32


def _mxfp4(d_in: int, d_out: int, group: int) -> int:
    blocks = d_out * ceil_div(d_in, group)
    return blocks * group // 2 + blocks


ROUTERS = ("moe/router", "moe/shared_expert_gate")
# transformers 5 quantizes nn.Linear modules with bitsandbytes: its MoE experts (stacked parameters)
# and routers are not nn.Linear, so they stay in 16 bits whatever the skip list says
BNB_FIXED = ("moe/router", "moe/experts")


@dataclass(frozen=True)
class Format:
    name: str
    matrix_bytes: Callable[[int, int, int], int]  # (d_in, d_out, group) -> bytes of one matrix
    group: int  # values per block or group (the formula's ``g``); 1: the format has none
    skip: tuple[str, ...]  # linears kept in the compute dtype by default: keys or key prefixes
    fixed: tuple[str, ...] = ()  # linears the format's integration cannot quantize (no skip list changes it)
    dequantizes: bool = False  # each matmul first expands its whole matrix to the compute dtype


FORMATS = {f.name: f for f in (
    Format("nf4", _bnb4(False), 64, ("lm_head",), BNB_FIXED, True),
    Format("nf4-dq", _bnb4(True), 64, ("lm_head",), BNB_FIXED, True),
    Format("fp4", _bnb4(False), 64, ("lm_head",), BNB_FIXED, True),
    Format("fp4-dq", _bnb4(True), 64, ("lm_head",), BNB_FIXED, True),
    Format("llm-int8", lambda d_in, d_out, g: d_in * d_out + d_out * FP32 + 1, 1, ("lm_head",), BNB_FIXED),
    Format("gptq-int4", _gptq(4), 128, ("lm_head", *ROUTERS)),
    Format("gptq-int8", _gptq(8), 128, ("lm_head", *ROUTERS)),
    Format("awq-int4", _awq, 128, ("lm_head", *ROUTERS)),
    Format("fp8-tensor", _fp8(lambda d_in, d_out, g: 1), 1, ("lm_head", *ROUTERS)),
    Format("fp8-channel", _fp8(lambda d_in, d_out, g: d_out), 1, ("lm_head", *ROUTERS)),
    Format("fp8-block", _fp8(lambda d_in, d_out, g: ceil_div(d_in, g) * ceil_div(d_out, g)), 128,
           ("lm_head", *ROUTERS)),
    # GPT-OSS: the experts only
    Format("mxfp4", _mxfp4, 32, ("lm_head", "attention", "mlp", "moe/router", "moe/shared_experts",
                                 "moe/shared_expert_gate")),
)}


def quantized(key: str, skip: tuple[str, ...]) -> bool:
    """Whether a linear of breakdown key ``key`` is quantized when ``skip`` is kept."""
    return not any(key == s or key.startswith(s + "/") for s in skip)


@dataclass(frozen=True)
class Storage:
    """A format applied to a model: its group size and what it keeps in the compute dtype."""

    format: Format
    group: int
    skip: tuple[str, ...]

    @classmethod
    def of(cls, name: str, group: int | None = None, skip: tuple[str, ...] | None = None) -> "Storage":
        f = FORMATS[name]
        return cls(f, f.group if group is None else group, f.skip if skip is None else skip)

    def quantizes(self, key: str) -> bool:
        return quantized(key, self.skip + self.format.fixed)

    def linear_bytes(self, m: Linear, dtype: str) -> int:
        """Bytes of one copy of ``m``, its bias in ``dtype``."""
        bias = weight_bytes(m.d_out, dtype) if m.bias else 0
        if not self.quantizes(m.key):
            return weight_bytes(m.d_in * m.d_out, dtype) + bias
        return self.format.matrix_bytes(m.d_in, m.d_out, self.group) + bias


def storage(cfg: ModelConfig, name: str) -> Storage:
    """Format ``name`` on ``cfg``: with the config's group size and skip list when ``name`` is the
    format the config declares (``dtype``), else with the format's defaults."""
    own = cfg.dtype == name
    return Storage.of(name, cfg.quant_group_size if own else None, cfg.quant_skip if own else None)


def matrices(cfg: ModelConfig) -> list[tuple[Linear, int]]:
    """What a format can quantize, each with its layer count: the layer linears (one per layer
    group) and an untied LM head."""
    out = [(m, g.count) for g in layer_plan(cfg) for m in Layer(cfg, g.spec).linears()]
    if not cfg.tie_embeddings:
        out.append((Linear("lm_head", cfg.d_model, cfg.vocab_size, cfg.lm_head_bias), 1))
    return out


def config_problem(cfg: ModelConfig) -> tuple[str, str] | None:
    """(key, message) when ``quant_skip`` names none of the model's linears or ``quant_group_size``
    is given to a format without groups; None when both are fine."""
    keys = frozen_keys(cfg)
    unknown = [s for s in cfg.quant_skip or () if all(quantized(k, (s,)) for k in keys)]
    if unknown:
        return "quant_skip", (f"{', '.join(unknown)} names none of the model's linears (breakdown keys or their "
                              "prefixes, e.g. lm_head, attention, moe/router)")
    if cfg.quant_group_size is not None and FORMATS[cfg.dtype].group == 1:
        return "quant_group_size", f"{cfg.dtype} has no blocks or groups to size"
    return None


def weights_bytes(cfg: ModelConfig, weights: str, dtype: str) -> int:
    """Bytes of all the model's weights stored as ``weights`` (a dtype, or a format whose
    unquantized tensors are in the compute dtype ``dtype``)."""
    if weights in FORMATS:
        return sum(stored_bytes(cfg, storage(cfg, weights), dtype).values())
    return weight_bytes(count_params(cfg).total, weights)


def checkpoint_bytes(cfg: ModelConfig, weights: str) -> int:
    """:func:`weights_bytes` with the rest in the model's inference compute dtype (RunSpec's policy)."""
    return weights_bytes(cfg, weights, RunSpec("prefill").resolve(cfg).dtype)


def linear_weight_bytes(cfg: ModelConfig, m: Linear, copies: int, weights: str, dtype: str) -> int:
    """Bytes of ``copies`` copies of ``m`` stored as ``weights``."""
    if weights in FORMATS:
        return copies * storage(cfg, weights).linear_bytes(m, dtype)
    return weight_bytes(copies * m.per_copy, weights)


def dequantized_bytes(cfg: ModelConfig, weights: str, dtype: str) -> int:
    """The transient a format that dequantizes (bitsandbytes 4-bit) needs: its largest quantized
    matrix expanded to ``dtype`` (0 for a plain dtype or a format whose kernels read it packed)."""
    if weights not in FORMATS or not FORMATS[weights].dequantizes:
        return 0
    s = storage(cfg, weights)
    return max([weight_bytes(m.d_in * m.d_out, dtype) for m, _ in matrices(cfg) if s.quantizes(m.key)], default=0)


def stored_bytes(cfg: ModelConfig, storage: Storage, dtype: str) -> dict[str, int]:
    """The model's weights by component under ``storage``, the rest in ``dtype``."""
    out = {k: weight_bytes(n, dtype) for k, n in count_params(cfg).components.items()}
    for m, layers in matrices(cfg):
        out[m.key] += (storage.linear_bytes(m, dtype) - weight_bytes(m.per_copy, dtype)) * m.copies * layers
    return out
