"""What the recurrent mixer descriptors (:mod:`.mamba`, :mod:`.mamba2`, :mod:`.short_conv`, :mod:`.lightning`,
:mod:`.gated_deltanet`, :mod:`.rglru`, :mod:`.kda`) share: the config they read, the causal conv most of them start
with, a backward that is twice the forward unless the mixer says otherwise, and the bytes their core kernel moves.

The **core** of a mixer (its ``core`` keys: the conv, the rule or scan, the elementwise ops between them and the
vectors they read) runs as one fused kernel per layer, as the fused kernels serving and training run it
(mamba_ssm's, fla's): its ops move nothing of their own and launch no kernel. It reads its inputs (``core_io``:
values a token) once, writes its outputs once and reads its vectors once; the states between its chunks are its
own (kept on chip, or written and read again by the kernel: the compulsory traffic, as flash attention's K/V
re-reads, so the ideal stays a bound on speed). A pass continuing cached sequences (a decode step, a later chunk
of a prefill) reads each sequence's state, conv and recurrent (``state_values``, the cache's size) first; an
inference pass writes it back (the cache); training keeps none (backward recomputes the chunk states, as the
fused kernels do)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .sizes import bytes_per, weight_bytes

if TYPE_CHECKING:
    from ..spec import RunSpec
    from .config import ModelConfig


# layer types with a recurrent mixer in place of attention (a state per sequence, no attention): Mamba-1, Mamba-2
# (SSD), LFM2's gated short convolution, MiniMax's lightning attention, Qwen3-Next's Gated DeltaNet,
# RecurrentGemma's RG-LRU block and Kimi Linear's KDA; and "none", no mixer (the layer is its FFN alone:
# Nemotron-H's MLP and MoE layers), which goes the recurrent layers' way (no attention, an empty mixer keeping no
# state; no tensor or context parallelism)
RECURRENT_TYPES = ("mamba", "mamba2", "short_conv", "none", "lightning", "gated_deltanet", "rglru", "kda")


class Mixer:
    """A recurrent layer's mixer, described from the model's config."""

    __slots__ = ("cfg",)
    core: tuple[str, ...] = ()  # the core kernel's keys (module docstring), its bytes under the first

    @property
    def core_io(self) -> tuple[int, int]:
        """Values the core kernel reads and writes per token (module docstring)."""
        return 0, 0

    @property
    def chunk(self) -> int | None:
        """The chunked (or blocked) form's chunk: a prefill's FLOPs repeat their pattern modulo it
        (:func:`analysis.perf.steps.period`; None: no chunks)."""
        return None

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg

    @staticmethod
    def conv_outputs(query_len: int, past: int, K: int) -> int:
        """Positions a causal conv of ``K`` taps computes per sequence: ``S + K - 1`` from the start
        (``padding=K-1``, the last ``K - 1`` dropped), ``C + 1`` continuing a cached sequence."""
        return query_len + K - 1 if past == 0 else query_len + 1

    def backward_matmul(self, batch: int, seq: int) -> dict[str, int]:
        """Backward matmul FLOPs minus twice the forward's, over ``seq`` tokens from the start, by key."""
        return {}

    def core_bytes(self, run: RunSpec, table: str) -> int:
        """Bytes one layer's core kernel moves in a pass (module docstring; ``run`` resolved), its vectors
        stored as ``table``."""
        read, written = self.core_io
        vectors = sum(v.size for v in self.vectors() if v.key in self.core)  # type: ignore[attr-defined]
        out = run.tokens * (read + written) * bytes_per(run.dtype) + weight_bytes(vectors, table)
        if run.mode != "train":  # read when cached sequences continue, written back (the cache)
            passes = 1 + (run.seq > run.query_len)
            out += passes * run.batch * weight_bytes(self.state_values, run.state_dtype or run.kv_dtype)  # type: ignore[attr-defined]
        return out
