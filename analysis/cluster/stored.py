"""Quantized weight formats (:mod:`analysis.model.formats`) under a parallel layout: what one GPU holds
of a format's stored bytes, and the tensor-parallel splits a format allows.

- tensor parallel: a TP rank stores its shard of each matrix as the format stores a matrix of the
  shard's size (:func:`.sharding.tp_local`'s widths): a column-parallel shard splits the output dim
  and its scales with it, a row-parallel shard the input dim and its groups. As vLLM's quantized
  linears require, a split dim must be a whole number of the format's units per shard
  (:func:`.sharding.check_splits`): groups or blocks along the input (GPTQ, AWQ, bitsandbytes' blocks,
  MXFP4), fp8-block's 128 x 128 blocks along the output too, GPTQ's and AWQ's packed int32 words
  of outputs (8 int4 or 4 int8 values);
- pipeline and expert parallel: whole layers per stage, whole experts per GPU, each stored as on
  one GPU;
- data parallel: every replica holds the same. ZeRO-3 (training: LoRA's frozen base, QLoRA) shards
  what FSDP-QLoRA shards (Answer.AI's FSDP + QLoRA, transformers' ``bnb_4bit_quant_storage``):
  each quantized matrix's packed codes (:attr:`Format.codes`), stored in a float dtype that FSDP
  splits and all-gathers as any weight, while its quantization state (scales, zeros, code maps:
  bitsandbytes' ``QuantState``, a module attribute rather than a parameter) stays whole on every GPU
  and is never gathered. Unquantized tensors shard as :meth:`.sharding.Tensor.shard` says.
"""

import functools
from typing import NamedTuple

from ..count.quant import Storage, storage
from ..model.config import ModelConfig
from ..model.sizes import ceil_div, weight_bytes
from ..spec import Layout
from .sharding import Tensor, stage_units


class Held(NamedTuple):
    """Bytes of an FSDP unit's base weights on one GPU."""

    whole: int  # without ZeRO-3
    shard: int  # its ZeRO-3 shard of what FSDP splits (packed codes, unquantized tensors)
    state: int  # what ZeRO-3 keeps whole on every GPU (the quantized matrices' scales, zeros, code maps)


def held_bytes(cfg: ModelConfig, layout: Layout, stage: int, weights: str, dtype: str, sharded: bool,
               expert: bool | None = None) -> int:
    """Bytes of the base weights one GPU of ``stage`` holds stored as format ``weights`` (the rest in
    ``dtype``), its ZeRO-3 share when ``sharded``; routed experts' alone, or the others, when
    ``expert`` says."""
    units = held_units(cfg, layout, stage, weights, dtype, expert)
    return sum(u.shard + u.state if sharded else u.whole for u in units)


def held_units(cfg: ModelConfig, layout: Layout, stage: int, weights: str, dtype: str,
               expert: bool | None = None) -> tuple[Held, ...]:
    """:class:`Held` of each FSDP unit of one GPU of ``stage`` (:func:`.sharding.stage_units`' order)."""
    return _held_units(cfg, weights, dtype, layout.tp, layout.pp, layout.ep, layout.vpp, stage, layout.replicas,
                       expert)


@functools.lru_cache(maxsize=4096)  # `plan` asks for the same stage under many layouts
def _held_units(cfg: ModelConfig, weights: str, dtype: str, tp: int, pp: int, ep: int, vpp: int, stage: int,
                replicas: int, expert: bool | None) -> tuple[Held, ...]:
    s = storage(cfg, weights)
    per_unit: dict[int, Held] = {}  # layers of one spec share one tuple of tensors
    out = []
    for unit in stage_units(cfg, Layout(tp=tp, pp=pp, dp=ep, ep=ep, vpp=vpp), stage):  # tensors hang on these alone
        if id(unit) not in per_unit:
            held = [_held(t, s, dtype, replicas // ep if t.expert else replicas) for t in unit
                    if expert is None or t.expert == expert]
            per_unit[id(unit)] = Held(*[sum(column) for column in zip(*held)] or (0, 0, 0))
        out.append(per_unit[id(unit)])
    return tuple(out)


def _held(t: Tensor, s: Storage, dtype: str, replicas: int) -> tuple[int, int, int]:
    """(whole, ZeRO-3 shard over ``replicas``, kept whole) bytes of ``t`` under ``s``."""
    if not (t.linear and s.quantizes(t.key)):
        return weight_bytes(t.numel, dtype), weight_bytes(t.shard(replicas), dtype), 0
    copies, d_in, d_out = t.matrix
    whole, codes = s.format.matrix_bytes(d_in, d_out, s.group), s.format.codes(d_in, d_out, s.group)
    return copies * whole, ceil_div(copies * codes, replicas), copies * (whole - codes)
