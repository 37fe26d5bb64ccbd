"""Memory: training state, attention working memory, activations and inference totals.

Conventions (README "Memory"):
- weights and gradients in the compute dtype; mixed precision (any dtype but fp32) adds
  fp32 master weights; Adam/AdamW keep two fp32 moments, SGD with momentum one, SGD none.
  bf16 + Adam = 2 + 2 + 4 + 8 = 16 bytes per parameter before activations;
- attention working memory is one layer's transient peak on top of weights and cache:
  eager attention holds the ``B*h*S*S_kv`` scores and the softmax output at once (the
  softmax reads one and writes the other); flash attention keeps only ``B*h*S`` fp32
  log-sum-exp values (its tiles live in on-chip memory). In training the softmax output
  and the log-sum-exp are counted with the saved activations; only the eager scores add;
- chunked prefill runs queries in chunks of C tokens against ``min(cached, W) + C`` keys;
  the peak is over the chunks;
- MoE: every expert's weights, gradients and optimizer state, activations for the
  ``experts_per_token`` experts each token visits.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .params import count_params, weight_bytes

OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "sgd": 0, "sgd-momentum": 1}  # fp32 values per parameter
FP32 = 4


@dataclass(frozen=True)
class TrainingState:
    weights: int
    gradients: int
    optimizer: int  # moments plus fp32 master weights under mixed precision


def training_state(cfg: ModelConfig, dtype: str, optimizer: str) -> TrainingState:
    n = count_params(cfg).total
    master = n * FP32 if dtype != "fp32" else 0
    return TrainingState(weight_bytes(n, dtype), weight_bytes(n, dtype),
                         OPTIMIZER_STATES[optimizer] * n * FP32 + master)


def chunk_spans(cfg: ModelConfig, seq: int, chunk: int | None) -> list[tuple[int, int]]:
    """(queries, keys) of the attention calls that can be the largest when prefilling ``seq``
    tokens: ``(seq, seq)`` unchunked; with chunks of C, the chunk at offset o attends to
    ``min(o, W) + len(chunk)`` keys, and the largest is the last or the last full chunk."""
    if chunk is None or chunk >= seq:
        return [(seq, seq)]
    last = chunk * ((seq - 1) // chunk)
    return [(min(chunk, seq - o), cfg.window(o) + min(chunk, seq - o)) for o in (last - chunk, last)]


def attention_bytes(cfg: ModelConfig, batch: int, queries: int, keys: int, attention: str,
                    dtype: str, training: bool = False) -> int:
    """One layer's transient attention memory (see the module docstring). In training the
    softmax output (eager) and the log-sum-exp (flash) are saved activations already, so
    only eager's pre-softmax scores are extra."""
    if attention == "flash":
        return 0 if training else batch * cfg.n_heads * queries * FP32
    scores = batch * cfg.n_heads * queries * keys * weight_bytes(1, dtype)
    return scores if training else 2 * scores


def attention_peak(cfg: ModelConfig, batch: int, seq: int, chunk: int | None, attention: str,
                   dtype: str) -> tuple[int, int, int]:
    """(bytes, queries, keys) of the prefill's largest attention call."""
    return max((attention_bytes(cfg, batch, q, k, attention, dtype), q, k)
               for q, k in chunk_spans(cfg, seq, chunk))


def logits_bytes(cfg: ModelConfig, batch: int, positions: int, dtype: str) -> int:
    return batch * positions * cfg.vocab_size * weight_bytes(1, dtype)
