"""Quantized weight storage: a model's weights, matrix by matrix, under one of the formats of
:mod:`analysis.model.formats` (its byte formula per quantized matrix; everything else in the
compute dtype).
"""

from typing import NamedTuple

from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.formats import FORMATS, Format, quantized
from ..model.parts import Linear
from ..model.sizes import weight_bytes
from ..spec import RunSpec
from .params import count_params


class Storage(NamedTuple):
    """A format applied to a model: its group size and what it keeps in the compute dtype."""

    format: Format
    group: int
    skip: tuple[str, ...]

    @classmethod
    def of(cls, name: str, group: int | None = None, skip: tuple[str, ...] | None = None) -> "Storage":
        f = FORMATS[name]
        return cls(f, f.group if group is None else group, f.skip if skip is None else skip)

    def quantizes(self, key: str) -> bool:
        return quantized(key, self.format.kept(self.skip))

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


def stored_dtype(cfg: ModelConfig, key: str, weights: str, dtype: str) -> str:
    """What a component's weights are stored as: ``weights`` (a dtype or a format) for a base matrix it
    covers; ``dtype``, the compute dtype, for a LoRA adapter (``<key>/lora``) and for the matrices a format
    leaves unquantized (its skip list, the stacked experts bitsandbytes cannot reach, all but the routed
    experts under MXFP4)."""
    if key.endswith("/lora") or (weights in FORMATS and not storage(cfg, weights).quantizes(key)):
        return dtype
    return weights


def component_bytes(cfg: ModelConfig, weights: str, dtype: str) -> dict[str, int]:
    """The model's weights by component stored as ``weights`` (a dtype, or a format whose unquantized tensors are
    in ``dtype``)."""
    if weights in FORMATS:
        return stored_bytes(cfg, storage(cfg, weights), dtype)
    return {k: weight_bytes(n, weights) for k, n in count_params(cfg).components.items()}


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
    quantized = [m for m, _ in build(cfg).linears() if s.quantizes(m.key)]
    return max([weight_bytes(m.d_in * m.d_out, dtype) for m in quantized], default=0)


def stored_bytes(cfg: ModelConfig, storage: Storage, dtype: str) -> dict[str, int]:
    """The model's weights by component under ``storage``, the rest in ``dtype``."""
    out = {k: weight_bytes(n, dtype) for k, n in count_params(cfg).components.items()}
    for m, layers in build(cfg).linears():
        out[m.key] += (storage.linear_bytes(m, dtype) - weight_bytes(m.per_copy, dtype)) * m.copies * layers
    return out
