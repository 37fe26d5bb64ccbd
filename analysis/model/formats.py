"""Quantized weight formats: the formats people deploy, one record each with its byte formula per
matrix (how a model's weights are stored under one: :mod:`analysis.count.quant`).

A format stores a quantized matrix ``d_out x d_in`` (``n = d_in * d_out`` values) as packed
codes plus scales (and zeros or code maps) per block or group. Everything it leaves alone stays
in the compute dtype: embeddings, norms, learned vectors, biases, and the linears its defaults
skip (``skip``: breakdown keys or their prefixes; the LM head for all, routers for some).
Each formula counts the tensors a checkpoint of the format holds per matrix (the docs' "Quantized
weights" page has the table and the sources):

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

A partial block or group (``d_in`` not a multiple of it) takes a whole one. ``codes`` counts a
matrix's packed values alone (``qweight``, the 4-bit or fp8 data), the rest being its quantization
state (scales, zeros, code maps, ``g_idx``): what ZeRO-3 shards and what it keeps whole
(:mod:`analysis.cluster.stored`).
"""

from typing import Callable, NamedTuple

from .sizes import FP16, FP32, INT32, ceil_div


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


def _bnb4_codes(d_in: int, d_out: int, group: int) -> int:
    return ceil_div(d_in * d_out, 2)


def _gptq_codes(bits: int) -> Callable[[int, int, int], int]:
    return lambda d_in, d_out, group: ceil_div(d_in, 32 // bits) * d_out * INT32


def _awq_codes(d_in: int, d_out: int, group: int) -> int:
    return d_in * ceil_div(d_out, 8) * INT32


def _values(d_in: int, d_out: int, group: int) -> int:  # one byte per value: int8 and fp8
    return d_in * d_out


def _mxfp4_codes(d_in: int, d_out: int, group: int) -> int:
    return d_out * ceil_div(d_in, group) * group // 2


def _fp8(scales: Callable[[int, int, int], int]) -> Callable[[int, int, int], int]:
    return lambda d_in, d_out, group: d_in * d_out + scales(d_in, d_out, group) * FP32


def _mxfp4(d_in: int, d_out: int, group: int) -> int:
    blocks = d_out * ceil_div(d_in, group)
    return blocks * group // 2 + blocks


ROUTERS = ("moe/router", "moe/shared_expert_gate")
# transformers 5 quantizes nn.Linear modules with bitsandbytes: its MoE experts (stacked parameters)
# and routers are not nn.Linear, so they stay in 16 bits whatever the skip list says
BNB_FIXED = ("moe/router", "moe/experts")


class Format(NamedTuple):
    """A quantized storage format: its byte formula per matrix and what it leaves unquantized."""

    name: str
    matrix_bytes: Callable[[int, int, int], int]  # (d_in, d_out, group) -> bytes of one matrix
    codes: Callable[[int, int, int], int]  # (d_in, d_out, group) -> bytes of its packed values alone
    group: int  # values per block or group (the formula's ``g``); 1: the format has none
    skip: tuple[str, ...]  # linears kept in the compute dtype by default: keys or key prefixes
    fixed: tuple[str, ...] = ()  # linears the format's integration cannot quantize (no skip list changes it)
    dequantizes: bool = False  # each matmul first expands its whole matrix to the compute dtype
    pack: int = 1  # output values packed in one int32 word (GPTQ's qzeros, AWQ's qweight): a column shard's unit
    out_blocks: bool = False  # blocks span the output dim too (fp8-block's 128 x 128): a column shard's unit
    pads: int = 1  # vLLM pads a split that is not whole units to a multiple of this (MXFP4's MoE: 64); 1: refuses

    def kept(self, skip: tuple[str, ...] | None = None) -> tuple[str, ...]:
        """The linears left in the compute dtype: ``skip`` (None: the format's defaults) and those its
        integration cannot quantize."""
        return (self.skip if skip is None else skip) + self.fixed


FORMATS = {f.name: f for f in (
    Format("nf4", _bnb4(False), _bnb4_codes, 64, ("lm_head",), BNB_FIXED, True),
    Format("nf4-dq", _bnb4(True), _bnb4_codes, 64, ("lm_head",), BNB_FIXED, True),
    Format("fp4", _bnb4(False), _bnb4_codes, 64, ("lm_head",), BNB_FIXED, True),
    Format("fp4-dq", _bnb4(True), _bnb4_codes, 64, ("lm_head",), BNB_FIXED, True),
    Format("llm-int8", lambda d_in, d_out, g: d_in * d_out + d_out * FP32 + 1, _values, 1, ("lm_head",), BNB_FIXED),
    Format("gptq-int4", _gptq(4), _gptq_codes(4), 128, ("lm_head", *ROUTERS), pack=8),
    Format("gptq-int8", _gptq(8), _gptq_codes(8), 128, ("lm_head", *ROUTERS), pack=4),
    Format("awq-int4", _awq, _awq_codes, 128, ("lm_head", *ROUTERS), pack=8),
    Format("fp8-tensor", _fp8(lambda d_in, d_out, g: 1), _values, 1, ("lm_head", *ROUTERS)),
    Format("fp8-channel", _fp8(lambda d_in, d_out, g: d_out), _values, 1, ("lm_head", *ROUTERS)),
    Format("fp8-block", _fp8(lambda d_in, d_out, g: ceil_div(d_in, g) * ceil_div(d_out, g)), _values, 128,
           ("lm_head", *ROUTERS), out_blocks=True),
    # GPT-OSS: the experts only
    Format("mxfp4", _mxfp4, _mxfp4_codes, 32, ("lm_head", "attention", "mlp", "moe/router", "moe/shared_experts",
                                               "moe/shared_expert_gate"), pads=64),
)}
WEIGHT_FORMATS = tuple(FORMATS)


def fp8_weights(weights: str) -> bool:
    """Whether weights stored as ``weights`` (a dtype or a format) are fp8 values: fp8 matmuls read them
    without a cast (:mod:`analysis.perf.float8`), and kernels stream them as fp8."""
    return weights == "fp8" or weights.startswith("fp8-")


# the scales an inference's fp8 matmuls take on fp8 weights, as the engines quantize each input: per tensor, or
# per token (a channel's scales, CUTLASS's rowwise GEMM) and per token group of 128 (blocks: priced as rowwise)
FP8_SCALES = {"fp8": "tensorwise", "fp8-tensor": "tensorwise", "fp8-channel": "rowwise", "fp8-block": "rowwise"}


def quantized(key: str, skip: tuple[str, ...]) -> bool:
    """Whether a linear of breakdown key ``key`` is quantized when ``skip`` is kept."""
    return not any(key == s or key.startswith(s + "/") for s in skip)
