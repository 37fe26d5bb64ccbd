"""The parts a model is made of: matrices, norms, learned vectors and embedding tables, with their
parameter counts. Descriptors (:mod:`analysis.model.attention`, :mod:`analysis.model.ffn`) list a
layer's parts with these; parameters, FLOPs and memory are all computed from those lists."""

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the config's schema names the attention kinds, whose descriptors use these parts
    from .config import ModelConfig


class Linear(NamedTuple):
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


class Norm(NamedTuple):
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


class Vector(NamedTuple):
    """Learned values used as is (attention sinks: one logit per head). ``shapes``: the tensors the reference
    holds them in, where not one vector of ``size`` (a conv's weight and bias, Mamba's ``A_log`` matrix), which
    ZeRO splits as :meth:`analysis.cluster.sharding.Tensor.shard` says."""

    key: str
    size: int
    shapes: tuple[tuple[int, ...], ...] = ()

    @property
    def params(self) -> int:
        return self.size

    @property
    def tensors(self) -> tuple[tuple[int, ...], ...]:
        return self.shapes or ((self.size,),)


def conv_vector(key: str, channels: int, taps: int, bias: bool) -> Vector:
    """A depthwise conv's weight ``(channels, 1, taps)`` and its bias, as ``nn.Conv1d`` holds them."""
    return Vector(key, channels * taps + (channels if bias else 0), ((channels, 1, taps),) + ((channels,),) * bias)


class Table(NamedTuple):
    """An embedding table: ``rows`` learned vectors of ``width`` (a token's, a position's, a bucket's)."""

    key: str
    rows: int
    width: int

    @property
    def params(self) -> int:
        return self.rows * self.width


def make_norm(cfg: "ModelConfig", key: str, size: int, rows: int = 1) -> Norm:
    return Norm(key, size, cfg.norm_weight, cfg.norm_has_bias, rows)
