"""The parts a layer is made of: matrices, norms and learned vectors, with their parameter
counts. Descriptors (:mod:`analysis.attention`, :mod:`analysis.ffn`) list a layer's parts with
these; parameters, FLOPs and memory are all computed from those lists."""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig


@dataclass(frozen=True)
class Linear:
    """A matrix ``d_in -> d_out`` held ``copies`` times, of which a token uses ``active``.
    ``over_keys``: it runs over every attended key rather than every new token (MLA's
    decompression of cached latents)."""

    key: str
    d_in: int
    d_out: int
    bias: bool
    copies: int = 1
    active: int = 1
    over_keys: bool = False

    @property
    def per_copy(self) -> int:
        return self.d_in * self.d_out + (self.d_out if self.bias else 0)

    @property
    def params(self) -> int:
        return self.copies * self.per_copy


@dataclass(frozen=True)
class Norm:
    """A norm over ``size`` elements, applied to ``rows`` rows per token (per-head q/k norms:
    one row per head)."""

    key: str
    size: int
    weight: bool
    bias: bool
    rows: int = 1

    @property
    def params(self) -> int:
        return self.size * (int(self.weight) + int(self.bias))


@dataclass(frozen=True)
class Vector:
    """A learned vector used as is (attention sinks: one logit per head)."""

    key: str
    size: int

    @property
    def params(self) -> int:
        return self.size


def make_norm(cfg: ModelConfig, key: str, size: int, rows: int = 1) -> Norm:
    return Norm(key, size, cfg.norm_weight, cfg.norm_has_bias, rows)
