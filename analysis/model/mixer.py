"""What the recurrent mixer descriptors (:mod:`.mamba`, :mod:`.mamba2`, :mod:`.short_conv`, :mod:`.lightning`,
:mod:`.gated_deltanet`, :mod:`.rglru`, :mod:`.kda`) share: the config they read, the causal conv most of them start
with, and a backward that is twice the forward unless the mixer says otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import ModelConfig


# layer types with a recurrent mixer in place of attention (a state per sequence, no attention): Mamba-1, Mamba-2
# (SSD), LFM2's gated short convolution, MiniMax's lightning attention, Qwen3-Next's Gated DeltaNet,
# RecurrentGemma's RG-LRU block and Kimi Linear's KDA; and "none", no mixer (the layer is its FFN alone:
# Nemotron-H's MLP and MoE layers), which goes the recurrent layers' way (no attention, an empty mixer keeping no
# state; one GPU only)
RECURRENT_TYPES = ("mamba", "mamba2", "short_conv", "none", "lightning", "gated_deltanet", "rglru", "kda")


class Mixer:
    """A recurrent layer's mixer, described from the model's config."""

    __slots__ = ("cfg",)

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
