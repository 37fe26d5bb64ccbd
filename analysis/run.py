"""RunSpec: the workload every analytic function takes, ``f(cfg, run)``.

One frozen type for what is being run: mode, batch, sequence length, attention
implementation, FLOP convention, recomputation, dtypes, chunked prefill and optimizer (and,
later, parallelism). ``None`` fields take the defaults of :meth:`RunSpec.resolve`, the one
place where llmcalc's dtype policy lives:

- compute dtype (activations, logits, attention scores): ``bf16`` for training; for
  inference the model's dtype when it is a float type, else ``bf16`` (a quantized model
  computes in bf16);
- weights: the compute dtype for training (mixed precision keeps fp32 master weights in the
  optimizer state), but a quantized model's format under LoRA (QLoRA on the checkpoint as it
  is; other weights for training without LoRA are refused, whichever analysis asks); the model's
  dtype for inference (int4 weights stay int4; a quantized
  format, :mod:`analysis.quant`, keeps what it does not quantize in the compute dtype);
- KV cache: the compute dtype. ``kvcache`` and ``memory`` both resolve through here, so they
  agree for the same model and options.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .config import DTYPE_BITS, FLOAT_DTYPES, WEIGHT_FORMATS, ModelConfig

if TYPE_CHECKING:
    from .lora import LoRA

MODES = ("train", "prefill", "decode")
ZERO_STAGES = (0, 1, 2, 3)
ATTENTION_IMPLS = ("eager", "flash")
RECOMPUTE = ("none", "selective", "full")  # activation recomputation (README "Memory")
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "sgd": 0, "sgd-momentum": 1}  # fp32 values per parameter


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def _check_whole(obj: object, names: tuple[str, ...], minimum: int = 1, optional: bool = False) -> None:
    """ValueError unless each field is an integer (not a bool) of at least ``minimum``, or None
    where ``optional``."""
    for name in names:
        value = getattr(obj, name)
        if not (optional and value is None) and (isinstance(value, bool) or not isinstance(value, int)
                                                 or value < minimum):
            kind = "a positive" if minimum == 1 else "a non-negative"
            raise ValueError(f"{name} must be {kind} integer, got {value!r}")


@dataclass(frozen=True)
class Layout:
    """How a run is split over GPUs (:mod:`analysis.parallel` has the conventions)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    zero: int = 0
    sp: bool = False
    micro_batches: int | None = None  # per step and pipeline; None: pp (1F1B's steady state)
    cp: int = 1  # context parallel: each sequence split over cp GPUs (ring attention)

    def __post_init__(self) -> None:
        _check_whole(self, ("tp", "pp", "dp", "ep", "cp"))
        _check_whole(self, ("micro_batches",), optional=True)
        if self.zero not in ZERO_STAGES:
            raise ValueError(f"zero must be one of 0, 1, 2, 3, got {self.zero!r}")
        if self.sp and self.tp == 1:
            raise ValueError("sequence parallelism (sp) splits activations over tp: it needs tp > 1")
        if self.dp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide dp ({self.dp}): experts are dealt over data-parallel GPUs")

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def replicas(self) -> int:
        """GPUs holding the same parameters (one per data- and context-parallel rank): ZeRO shards
        and gradient reductions run over them."""
        return self.dp * self.cp

    @property
    def trivial(self) -> bool:
        return self.gpus == 1

    @property
    def steps(self) -> int:
        """Micro-batches per step through the pipeline."""
        return self.micro_batches or self.pp

    def in_flight(self, stage: int) -> int:
        """Micro-batches whose activations pipeline stage ``stage`` keeps at once under 1F1B."""
        return min(self.pp - stage, self.steps)

    def describe(self) -> str:
        parts = [f"{name} {getattr(self, name)}" for name in ("tp", "cp", "pp", "dp", "ep") if getattr(self, name) > 1]
        if self.zero:
            parts.append(f"ZeRO-{self.zero}")
        if self.sp:
            parts.append("sp")
        return ", ".join(parts) or "one GPU"


@dataclass(frozen=True)
class RunSpec:
    """``train``: forward+backward over ``batch x seq`` tokens, logits everywhere.
    ``prefill``: forward over the prompt, logits for the last position unless ``all_logits``.
    ``decode``: one new token per sequence whose context (cache plus itself) is ``seq``.
    A prefill with ``past`` P is one chunk of a chunked prefill: the queries at positions
    ``P..seq-1`` against the P cached tokens and themselves (a decode is the chunk ``P = seq - 1``)."""

    mode: str = "train"
    seq: int | None = None  # None: the model's context length
    batch: int = 1
    attention: str = "flash"  # eager | flash
    causal: bool = False  # FLOP convention: False dense score matrix, True unmasked pairs only
    recompute: str = "none"  # training: none | selective (eager attention's core) | full (every layer)
    all_logits: bool = False  # prefill: logits at every position
    dtype: str | None = None  # compute dtype
    weights_dtype: str | None = None
    kv_dtype: str | None = None
    chunk: int | None = None  # chunked prefill: C tokens per chunk
    optimizer: str = "adam"
    past: int = 0  # prefill: tokens already cached, the pass runs positions past..seq-1 (one chunk)
    logits: bool = True  # prefill: False for a chunk before the last, which computes no logits
    layout: Layout = Layout()  # parallelism: every figure is one GPU's when it is not trivial
    lora: "LoRA | None" = None  # training: LoRA adapters on a frozen base (analysis.lora)

    def __post_init__(self) -> None:
        for name, value, choices in (("mode", self.mode, MODES), ("attention", self.attention, ATTENTION_IMPLS),
                                     ("optimizer", self.optimizer, tuple(OPTIMIZER_STATES)),
                                     ("recompute", self.recompute, RECOMPUTE),
                                     ("dtype", self.dtype, (None, *FLOAT_DTYPES)),
                                     ("weights_dtype", self.weights_dtype, (None, *DTYPE_BITS, *WEIGHT_FORMATS)),
                                     ("kv_dtype", self.kv_dtype, (None, *DTYPE_BITS))):
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
        _check_whole(self, ("seq", "batch", "chunk"), optional=True)
        _check_whole(self, ("past",), minimum=0)
        if self.lora is not None and self.mode != "train":
            raise ValueError("LoRA adapters apply to training (--mode train)")
        if self.past and (self.mode != "prefill" or self.seq is None or self.past >= self.seq):
            raise ValueError(f"past applies to a prefill of more than past tokens, got {self.past} with "
                             f"{self.mode} of {self.seq}")

    def resolve(self, cfg: ModelConfig) -> "RunSpec":
        """Every ``None`` replaced by its default for ``cfg`` (module docstring)."""
        train = self.mode == "train"
        dtype = self.dtype or ("bf16" if train or cfg.dtype not in FLOAT_DTYPES else cfg.dtype)
        stored = not train or (self.lora is not None and cfg.dtype in WEIGHT_FORMATS)  # QLoRA on its checkpoint
        if train and self.lora is None and self.weights_dtype not in (None, dtype):
            raise ValueError(f"training stores the weights in the compute dtype ({dtype}); {self.weights_dtype} "
                             "weights train only as a frozen base under LoRA adapters (QLoRA)")
        return dataclasses.replace(
            self, seq=self.seq or cfg.context_length, dtype=dtype,
            weights_dtype=self.weights_dtype or (cfg.dtype if stored else dtype),
            kv_dtype=self.kv_dtype or dtype)

    def replace(self, **changes) -> "RunSpec":
        return dataclasses.replace(self, **changes)

    def executed(self) -> "RunSpec":
        """Counted as kernels execute it: flash skips the masked blocks, eager computes them all."""
        return self.replace(causal=self.attention == "flash")

    @property
    def query_len(self) -> int:
        return 1 if self.mode == "decode" else self._seq - self.past

    @property
    def tokens(self) -> int:
        return self.batch * self.query_len

    @property
    def logit_tokens(self) -> int:
        if self.mode == "prefill" and not self.all_logits:
            return self.batch if self.logits else 0
        return self.tokens

    @property
    def _seq(self) -> int:
        if self.seq is None:
            raise ValueError("RunSpec.seq is unset: call resolve(cfg) first")
        return self.seq


def bytes_per(dtype: str) -> int:
    """Bytes of one value (int4: two values per byte, so counts go through ``weight_bytes``)."""
    return max(1, DTYPE_BITS[dtype] // 8)


def weight_bytes(values: int, dtype: str) -> int:
    """Bytes to store ``values`` values of ``dtype`` (int4 packs two per byte, rounded up)."""
    return (values * DTYPE_BITS[dtype] + 7) // 8
