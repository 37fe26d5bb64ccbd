"""The tape of saved tensors: how the bytes autograd keeps for backward are accounted.

Each descriptor (:mod:`analysis.model.attention`, :mod:`analysis.model.ffn`) records on a
:class:`Tape` what its kind saves; :mod:`analysis.count.activations` runs the block and sums the
tapes. The conventions are in :mod:`analysis.count.activations`' docstring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .variants import ACTIVATIONS, norm_stat_values

if TYPE_CHECKING:  # see attention.py
    from .config import ModelConfig

# the residual stream an FFN branch reads before its norm: a ``dense+moe`` FFN's norms read it too (one storage)
FFN_RESIDUAL = "ffn residual"
INDEX = 8  # int64 token ids and indices
STAT = 4  # fp32 norm statistics and log-sum-exp


class Tape:
    """Saved storages in forward order. A storage several ops save is named, and counts once,
    under the first component saving it; unnamed saves are storages no other op saves."""

    def __init__(self, cfg: ModelConfig, b: int, adapted: frozenset[str] | None = None, rank: int = 0):
        self.cfg, self.b = cfg, b  # b: bytes per value
        self.adapted, self.rank = adapted, rank  # LoRA: the adapted linears' keys (None: all trained)
        self.bytes: dict[str, int] = {}
        self._seen: set[str] = set()

    def save(self, key: str, nbytes: int, name: str | None = None) -> None:
        if name is not None:
            if name in self._seen:
                return
            self._seen.add(name)
        self.bytes[key] = self.bytes.get(key, 0) + nbytes

    def linear(self, key: str, nbytes: int, rows: int, x: str | None = None) -> None:
        """A linear's input, ``nbytes`` (the storage ``x`` names), over ``rows`` rows. A trained
        weight keeps it for its gradient. Under LoRA the base is frozen and keeps nothing (its
        input gradient needs only the weight); an adapter keeps the input (A's gradient) and
        A's output, ``rows x r`` values (B's), under ``key/lora``."""
        if self.adapted is None:
            self.save(key, nbytes, x)
        elif key in self.adapted:
            self.save(key + "/lora", nbytes, x)
            self.save(key + "/lora", rows * self.rank * self.b)

    def norm(self, key: str, x: str | None, rows: int, width: int, storage: int | None = None) -> str:
        """Saves the input ``x`` (``storage`` values when it is a view of a larger tensor) and
        fp32 statistics per row; returns the name of the output."""
        self.save(key, (rows * width if storage is None else storage) * self.b, x)
        self.save(key, rows * norm_stat_bytes(self.cfg))
        return key + " output"


def norm_stat_bytes(cfg: ModelConfig) -> int:
    """fp32 statistics a norm keeps per row: LayerNorm mean and rstd, RMSNorm rstd."""
    return STAT * norm_stat_values(cfg.norm)


def eager_core(tape: Tape, cfg: ModelConfig, B: int, S: int, d_qk: int, k: int, v: int) -> None:
    """Eager scores, softmax and values over ``h`` heads: q (``T*h*d_qk`` values, a copy or
    its own storage), ``k`` and ``v`` values of K and V as the batched matmuls read them."""
    T, h, b = B * S, cfg.n_heads, tape.b
    tape.save("attention/scores", (T * h * d_qk + k) * b)  # q and k
    if cfg.attn_logit_softcap is not None:
        tape.save("attention", B * h * S * S * b)  # tanh's output
    tape.save("attention", B * h * S * (S + cfg.attention_sinks) * b)  # softmax output
    tape.save("attention/values", v * b)


def merge_copies(B: int, S: int, h: int, d: int, rows: bool = True) -> bool:
    """Whether an output laid out heads-first, (B, h, S, d), reaches the o projection's
    (B*S, h*d) matrix only through a copy (the o projection then keeps the copy); ``rows=False``: its
    (B, S, h*d) merged heads (what an output gate multiplies). Size-1 dimensions can make the strides
    agree: a view when S or h is 1, or when d is (and, for the matrix, B)."""
    return S > 1 and h > 1 and (d > 1 or (rows and B > 1))


def hidden(tape: Tape, cfg: ModelConfig, act_key: str, down_key: str, tag: str, rows: int,
            width: int, norm: str | None = None) -> None:
    """The activation's saved tensors and the down projection's input, ``rows x width`` each;
    ``norm``: a norm between them (BitNet's ``mlp/sub_norm``) keeps the activation's output and its
    statistics, and down the norm's output."""
    for name in ACTIVATIONS[cfg.activation].saves:  # "out" (relu) is saved by relu itself
        tape.save(act_key, rows * width * tape.b, tag + name)
    x = tag + "out"
    if norm is not None:
        x = tape.norm(norm, x, rows, width)
    tape.linear(down_key, rows * width * tape.b, rows, x)
