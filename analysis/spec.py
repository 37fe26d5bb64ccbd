"""The run spec: the workload every analytic function takes, ``f(cfg, run)``.

One frozen :class:`RunSpec` says what is being run: mode, batch, sequence length, attention
implementation, FLOP convention, recomputation, dtypes, chunked prefill, optimizer, the GPU
:class:`Layout` and :class:`LoRA` adapters. Every rule about a run lives here or in the function
that needs it, and a broken one raises :class:`~analysis.errors.SpecError` naming the field (the
CLI maps it to its flag). Which fields apply to which mode is the data :data:`APPLIES`.

``None`` fields take the defaults of :meth:`RunSpec.resolve`, the one place where llmcalc's
dtype policy lives:

- compute dtype (activations, logits, attention scores): ``bf16`` for training; for
  inference the model's dtype when it is a float type, else ``bf16`` (a quantized model
  computes in bf16). ``fp8`` is FP8 compute as torchao's float8 training and TransformerEngine
  run it: the layers' matmuls in fp8 (``matmul_dtype``), every other value (activations, saved
  tensors, gradients, optimizer state, KV cache) in ``bf16``, so it resolves to ``dtype`` bf16 and
  ``matmul_dtype`` fp8; its weights are float or fp8 (:mod:`analysis.perf.float8`);
- weights: the compute dtype for training (mixed precision keeps fp32 master weights in the
  optimizer state), but a quantized model's format under LoRA (QLoRA on the checkpoint as it
  is; other weights for training without LoRA are refused, whichever analysis asks); the model's
  dtype for inference (int4 weights stay int4; a quantized format,
  :mod:`analysis.model.formats`, keeps what it does not quantize in the compute dtype);
- KV cache: the compute dtype. ``kvcache`` and ``memory`` both resolve through here, so they
  agree for the same model and options;
- gradients (training): the compute dtype (``grad_dtype``: the dtype the gradients are held, accumulated
  over micro-batches, and reduced over data-parallel GPUs in; Megatron-LM's ``--bf16`` default and
  torchtitan's FSDP default are fp32, docs/conventions.md);
- images (``images`` per sequence, of ``image_size`` pixels, the tower's default when None): the
  sequence the language model runs is ``seq`` text tokens plus each image's tokens (the projector's
  outputs, :func:`analysis.model.vision.image`): the resolved ``seq`` is the whole sequence and
  ``text`` its text tokens. The tower runs in ``train`` and ``prefill`` (a decode's images are in
  its cache already).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from .errors import SpecError, brief, shorten
from .model.architecture import build
from .model.config import ModelConfig, check_config
from .model.formats import FORMATS, FP8_SCALES, WEIGHT_FORMATS, fp8_weights, quantized
from .model.sizes import COMPUTE_DTYPES, DTYPE_BITS, FLOAT_DTYPES, MAX_INT

MODES = ("train", "prefill", "decode")
ZERO_STAGES = (0, 1, 2, 3)
ATTENTION_IMPLS = ("eager", "flash")
FP8_SCALINGS = ("tensorwise", "rowwise")  # torchao's float8 recipes (analysis/perf/float8.py)
RECOMPUTE = ("none", "selective", "op", "full")  # activation recomputation (analysis/count/recompute.py)
GRAD_DTYPES = FLOAT_DTYPES  # gradients: held, accumulated and reduced in one of these
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "sgd": 0, "sgd-momentum": 1}  # fp32 values per parameter

# The fields that apply to some modes only (every other field applies to every mode): set to
# anything but its default in another mode, a field is refused (RunSpec, Layout.of), and the CLI
# warns that the option giving it is ignored. ``layout.*`` are the layout's fields; ``global_batch``
# is Layout.of's (the sequences of a training step over all GPUs).
APPLIES = {
    "recompute": ("train",),
    "optimizer": ("train",),
    "grad_dtype": ("train",),
    "lora": ("train",),
    "layout.zero": ("train",),
    "layout.vpp": ("train",),  # interleaved 1F1B is a training schedule
    "global_batch": ("train", "prefill", "decode"),  # inference: the sequences in flight over the pipeline
    "all_logits": ("prefill",),
    "chunk": ("prefill",),
    "past": ("prefill",),
    "kv_dtype": ("prefill", "decode"),  # training keeps no KV cache
    "state_dtype": ("prefill", "decode"),  # nor a recurrent state
}


def applies(field: str, mode: str) -> bool:
    """Whether the run-spec field ``field`` means anything in ``mode``."""
    return mode in APPLIES.get(field, MODES)


def drop_inapplicable(modes: tuple[str, ...], **options) -> tuple[dict, tuple[str, ...]]:
    """``options`` (RunSpec's fields and Layout.of's keywords, as given) with each one that applies to
    none of ``modes`` back at its default; and the :data:`APPLIES` names (``layout.zero``) of those
    given otherwise, which a command line ignores with a warning."""
    kept, ignored = dict(options), []
    for option, value in options.items():
        field = f"layout.{option}" if option in Layout.__dataclass_fields__ else option
        if field in APPLIES and value != _DEFAULTS[field] and not any(applies(field, m) for m in modes):
            kept[option] = _DEFAULTS[field]
            ignored.append(field)
    return kept, tuple(ignored)


def _check_whole(obj: object, names: tuple[str, ...], prefix: str = "", minimum: int = 1,
                 optional: bool = False) -> None:
    """SpecError unless each field is an integer (not a bool) from ``minimum`` to MAX_INT, or None
    where ``optional``."""
    for name in names:
        value = getattr(obj, name)
        if not (optional and value is None) and (isinstance(value, bool) or not isinstance(value, int)
                                                 or not minimum <= value <= MAX_INT):
            kind = "a positive" if minimum == 1 else "a non-negative"
            raise SpecError(prefix + name, f"must be {kind} integer up to 2^53, got {brief(value)}")


def check_arguments(cfg: object, *run: object) -> None:
    """SpecError unless the arguments of an analytic function are a ModelConfig (and a RunSpec,
    where it takes one): the public API checks what it is given, as the command line does."""
    check_config(cfg)
    if run and not isinstance(run[0], RunSpec):
        raise SpecError("run", f"must be a RunSpec, got {brief(run[0])}")


def _check_choice(field: str, value: object, choices: tuple) -> None:
    if value not in choices:
        raise SpecError(field, f"must be one of {', '.join(map(str, choices))}, got {brief(value)}")


def in_flight(pp: int, stage: int, steps: int) -> int:
    """Micro-batches whose activations pipeline stage ``stage`` of ``pp`` keeps at once under 1F1B, of
    ``steps`` a step: the warm-up forwards before its first backward."""
    return min(pp - stage, steps)


@dataclass(frozen=True)
class Layout:
    """How a run is split over GPUs (:mod:`analysis.cluster.sharding` has the conventions)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    zero: int = 0
    sp: bool = False
    micro_batches: int | None = None  # per step and pipeline; None: pp (1F1B's steady state)
    cp: int = 1  # context parallel: each sequence split over cp GPUs (ring attention)
    vpp: int = 1  # virtual pipeline stages (model chunks) per GPU: interleaved 1F1B when > 1
    async_tp: bool = False  # tensor-parallel collectives overlapped with their matmuls (torchtitan's async TP)

    def __post_init__(self) -> None:
        _check_whole(self, ("tp", "pp", "dp", "ep", "cp", "vpp"), "layout.")
        _check_whole(self, ("micro_batches",), "layout.", optional=True)
        for name in ("sp", "async_tp"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"layout.{name}", f"must be true or false, got {brief(getattr(self, name))}")
        _check_choice("layout.zero", self.zero, ZERO_STAGES)
        if self.sp and self.tp == 1:
            raise SpecError("layout.sp", "(sequence parallelism) splits activations over tp: it needs tp > 1")
        if self.async_tp and not self.sp:
            raise SpecError("layout.async_tp", "(asynchronous tensor parallelism) overlaps sequence parallelism's "
                                               "all-gathers and reduce-scatters with their matmuls: it needs --sp")
        if self.dp % self.ep:
            raise SpecError("layout.ep", f"{self.ep} must divide dp ({self.dp}): experts are dealt over "
                                         "data-parallel GPUs")
        if self.vpp > 1 and self.pp == 1:
            raise SpecError("layout.vpp", f"{self.vpp} (interleaved 1F1B) splits each pipeline stage into model "
                                          "chunks: it needs pp > 1")
        if self.vpp > 1 and self.steps % self.pp:
            raise SpecError("layout.vpp", f"{self.vpp} (interleaved 1F1B) needs the micro-batches per step "
                                          f"({self.steps:,}) to be a multiple of pp ({self.pp}), as Megatron-LM's "
                                          "schedule does")

    @classmethod
    def of(cls, tp: int = 1, pp: int = 1, dp: int = 1, ep: int = 1, zero: int = 0, sp: bool = False, cp: int = 1,
           global_batch: int | None = None, batch: int = 1, gpus: int | None = None,
           mode: str = "train", vpp: int = 1, async_tp: bool = False) -> "Layout":
        """The layout of a run's options: ``global_batch`` sequences per training step over all GPUs
        sets the micro-batches per step (``global_batch / (batch x dp)``); ``gpus``, when given, must
        be its GPU count."""
        micro = None
        if global_batch is not None:
            if not applies("global_batch", mode):
                raise SpecError("global_batch", f"applies to mode {' or '.join(APPLIES['global_batch'])} only")
            for name, value in (("global_batch", global_batch), ("batch", batch), ("layout.dp", dp)):  # divided by
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise SpecError(name, f"must be a positive integer, got {brief(value)}")
            if global_batch % (batch * dp):
                raise SpecError("global_batch", f"{global_batch:,} must be a multiple of batch x dp "
                                                f"({batch:,} x {dp:,})")
            micro = global_batch // (batch * dp)
            if mode != "train" and pp == 1:
                raise SpecError("global_batch", "in inference, the sequences in flight through a pipeline: it needs "
                                                "--pp > 1 (one GPU's batch is --batch)")
        layout = cls(tp, pp, dp, ep, zero, sp, micro, cp, vpp, async_tp)
        if gpus is not None and gpus != layout.gpus:
            raise SpecError("gpus", f"{gpus:,} must equal tp x cp x pp x dp = {layout.gpus:,}")
        return layout

    @classmethod
    def expert_gpu(cls, ep: int) -> "Layout":
        """What one GPU's pass sees of a layout with ``ep`` expert-parallel GPUs: the experts it holds of its
        group, nothing else split (one GPU without ``ep``)."""
        return cls(dp=ep, ep=ep)

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def idle(self) -> tuple[tuple[str, str], ...]:
        """The fields set that change nothing on this layout, each with why: ZeRO with one replica."""
        return (("zero", "shards over the data-parallel GPUs (dp x cp), and there is one"),) \
            if self.zero and self.replicas == 1 else ()

    @property
    def replicas(self) -> int:
        """GPUs holding the same parameters (one per data- and context-parallel rank): ZeRO shards
        and gradient reductions run over them."""
        return self.dp * self.cp

    @property
    def trivial(self) -> bool:
        return self.gpus == 1

    @property
    def one_pass(self) -> bool:
        """One GPU running one micro-batch a step: the pass is the step (a global batch of several
        micro-batches accumulates their gradients before one optimizer step: ``cluster.step``)."""
        return self.trivial and self.steps == 1

    @property
    def steps(self) -> int:
        """Micro-batches per step through the pipeline."""
        return self.micro_batches or self.pp

    def in_flight(self, stage: int) -> int:
        """Micro-batches whose activations pipeline stage ``stage`` keeps at once under 1F1B."""
        return in_flight(self.pp, stage, self.steps)

    def describe(self) -> str:
        parts = [f"{name} {getattr(self, name)}" for name in ("tp", "cp", "pp", "dp", "ep") if getattr(self, name) > 1]
        if self.zero:
            parts.append(f"ZeRO-{self.zero}")
        if self.vpp > 1:
            parts.append(f"vpp {self.vpp}")
        if self.sp:
            parts.append("sp")
        if self.async_tp:
            parts.append("async TP")
        return ", ".join(parts) or "one GPU"


ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class LoRA:
    """Adapters of rank ``rank`` on the ``targets`` linears of a frozen base (Hu et al., 2021, as
    PEFT adds them: :mod:`analysis.count.lora`). Targets are breakdown keys of the layers
    (``attention/q``, ``mlp/down``, ``moe/experts``, ...) or ``all-linear``."""

    rank: int
    targets: tuple[str, ...] = ("attention/q", "attention/v")  # PEFT's default for Llama-style models
    alpha: float | None = None  # None: alpha = rank (scaling 1)

    def __post_init__(self) -> None:
        _check_whole(self, ("rank",), "lora.")
        if not isinstance(self.targets, tuple) or not self.targets or not all(isinstance(t, str) for t in
                                                                              self.targets):
            given = "none given" if self.targets in ((), "", []) else f"got {brief(self.targets)}"
            raise SpecError("lora.targets", f"needs at least one breakdown key, or {ALL_LINEAR}; {given}")
        if self.alpha is not None and (isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float))
                                       or not 0 < self.alpha < math.inf):
            raise SpecError("lora.alpha", f"must be a positive number, got {brief(self.alpha)}")

    @property
    def scaling(self) -> float:
        return (self.rank if self.alpha is None else self.alpha) / self.rank


def check_new(new: object) -> None:
    """SpecError unless ``new``, the tokens a generation adds, is a positive integer."""
    if isinstance(new, bool) or not isinstance(new, int) or new < 1:
        raise SpecError("new", f"must be a positive integer (the tokens generated), got {brief(new)}")


@functools.lru_cache(maxsize=256)  # every resolve of a run with adapters checks its targets (`plan`: hundreds)
def linear_keys(cfg: ModelConfig) -> tuple[str, ...]:
    """The breakdown keys of the model's layer linears, in order: what LoRA can target."""
    return tuple(dict.fromkeys(m.key for m, _ in build(cfg).layer_linears()))


def targeted(cfg: ModelConfig, lora: LoRA) -> list[str]:
    """The keys ``lora`` adapts in ``cfg``; SpecError naming a target the model lacks."""
    available = linear_keys(cfg)
    missing = [t for t in lora.targets if t not in (*available, ALL_LINEAR)]
    if missing:
        raise SpecError("lora.targets", f"{shorten(', '.join(missing))}: {cfg.name} has no such linear to adapt (its "
                                        f"linears: {', '.join(available)}, or {ALL_LINEAR})")
    return list(available if ALL_LINEAR in lora.targets else dict.fromkeys(lora.targets))


def lora_refusal(cfg: ModelConfig) -> str | None:
    """Why LoRA adapters on ``cfg`` are refused, or None: their placement on a recurrent mixer's, the
    hyper-connections' or Gemma 3n's own matrices is not modeled."""
    what = (f"a model with {cfg.recurrent_kind} layers" if cfg.has_recurrent
            else "a model with hyper-connections (hyper)" if cfg.hyper is not None
            else "Gemma 3n's layers (gemma3n)" if cfg.gemma3n is not None else None)
    return None if what is None else f"adapters on {what} are not modeled"


def recompute_refusal(cfg: ModelConfig, recompute: str, lora: LoRA | None = None) -> str | None:
    """Why ``recompute`` is refused for ``cfg`` (with ``lora``), or None. Per-op checkpointing
    (analysis/count/recompute.py): its policy counts the linears of attention and FFN layers alone. Full
    recomputation: with K/V shared across layers, a checkpointed layer reads K and V kept outside it. Neither
    with Gemma 3n's layers, whose checkpoint would keep the streams and the per-layer input: not modeled."""
    if recompute in ("full", "op") and cfg.gemma3n is not None:
        return (f"{recompute} recomputation with Gemma 3n's layers (gemma3n) is not modeled: a checkpointed layer "
                "keeps its streams and its per-layer input")
    if recompute == "full" and cfg.kv_shared_layers:
        return ("full recomputation with layers reading an earlier layer's K/V (kv_shared_layers) is not modeled: "
                "the K and V a checkpointed layer reads from another are kept outside its checkpoint")
    if recompute != "op":
        return None
    why = ("LoRA adapters" if lora is not None else f"{cfg.recurrent_kind} layers" if cfg.has_recurrent
           else "DSA's indexer" if cfg.dsa is not None else "hyper-connections" if cfg.hyper is not None
           else "layers reading an earlier layer's K/V (kv_shared_layers)" if cfg.kv_shared_layers else None)
    return None if why is None else (f"op (per-op selective checkpointing) with {why} is not modeled: its "
                                     "policy counts the linears of attention and FFN layers")


@dataclass(frozen=True)
class RunSpec:
    """``train``: forward+backward over ``batch x seq`` tokens, logits everywhere.
    ``prefill``: forward over the prompt, logits for the last position unless ``all_logits``.
    ``decode``: one new token per sequence whose context (cache plus itself) is ``seq``.
    A prefill with ``past`` P is one chunk of a chunked prefill: the queries at positions
    ``P..seq-1`` against the P cached tokens and themselves (a decode is the chunk ``P = seq - 1``)."""

    mode: str = "train"
    seq: int | None = None  # None: the model's context length (with images: the text what they leave of it)
    batch: int = 1
    attention: str = "flash"  # eager | flash
    causal: bool = False  # FLOP convention: False dense score matrix, True unmasked pairs only
    recompute: str = "none"  # training: none | selective (eager attention's core) | op (per-op) | full (every layer)
    all_logits: bool = False  # prefill: logits at every position
    dtype: str | None = None  # compute dtype
    weights_dtype: str | None = None
    kv_dtype: str | None = None
    state_dtype: str | None = None  # a recurrent layer's state (None: the KV dtype)
    chunk: int | None = None  # chunked prefill: C tokens per chunk
    optimizer: str = "adam"
    past: int = 0  # prefill: tokens already cached, the pass runs positions past..seq-1 (one chunk)
    logits: bool = True  # prefill: False for a chunk before the last, which computes no logits
    layout: Layout = Layout()  # parallelism: every figure is one GPU's when it is not trivial
    lora: LoRA | None = None  # training: LoRA adapters on a frozen base
    images: int = 0  # images per sequence: the vision tower's tokens join the sequence (module docstring)
    image_size: int | None = None  # pixels a side (square); None: the tower's default resolution
    text: int | None = None  # set by resolve with images: the text tokens of seq, the rest are the images'
    matmul_dtype: str | None = None  # the layers' matmuls (None: the compute dtype; dtype fp8 sets fp8)
    fp8_scaling: str | None = None  # fp8 matmuls: tensorwise | rowwise scales (None: tensorwise, fp8 weights' own)
    grad_dtype: str | None = None  # training: gradients held and reduced in it (None: the compute dtype)

    def __post_init__(self) -> None:
        for name, choices in _CHOICES:
            _check_choice(name, getattr(self, name), choices)
        for name in ("causal", "all_logits", "logits"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(name, f"must be true or false, got {brief(getattr(self, name))}")
        _check_whole(self, ("seq", "chunk"), optional=True)
        _check_whole(self, ("batch",))
        _check_whole(self, ("past",), minimum=0)
        self._check_layout()
        if self.lora is not None and not isinstance(self.lora, LoRA):
            raise SpecError("lora", f"must be a LoRA or None, got {brief(self.lora)}")
        self._check_modes(_APPLIES_FIELDS[False], self)
        _check_whole(self, ("images",), minimum=0)
        _check_whole(self, ("image_size", "text"), optional=True)
        if self.image_size is not None and not self.images:
            raise SpecError("image_size", "applies with images (the size of each image), got no images")
        if self.text is not None and not self.images:  # resolve checks it against the images
            raise SpecError("text", "applies with images (resolve's: the text tokens of seq beside them), got no "
                                    "images")
        if self.images and self.past:
            raise SpecError("images", "with past: one chunk of a prefill with images is not modeled (the tower "
                                      "runs before the first chunk)")
        if self.past and (self.seq is None or self.past >= self.seq):
            raise SpecError("past", f"applies to a prefill of more than past tokens, got {self.past} of {self.seq}")

    def resolve(self, cfg: ModelConfig) -> "RunSpec":
        """Every ``None`` replaced by its default for ``cfg`` (module docstring)."""
        check_config(cfg)
        train = self.mode == "train"
        fp8 = "fp8" in (self.dtype, self.matmul_dtype)  # matmul_dtype: a run resolved before
        if fp8 and self.lora is not None:
            raise SpecError("dtype", "fp8 with LoRA adapters is not modeled (float8 training converts the base's "
                                     "linears, which LoRA freezes)")
        refusal = recompute_refusal(cfg, self.recompute, self.lora)
        if refusal is not None:
            raise SpecError("recompute", refusal)
        if self.fp8_scaling is not None and not fp8:
            raise SpecError("fp8_scaling", f"{self.fp8_scaling} scales fp8 matmuls, which this run has none of "
                                           "(--dtype fp8, or an inference on fp8 weights on a GPU with an fp8 peak)")
        dtype = "bf16" if self.dtype == "fp8" else self.dtype or (
            "bf16" if train or cfg.dtype not in FLOAT_DTYPES else cfg.dtype)
        stored = not train or (self.lora is not None and cfg.dtype in WEIGHT_FORMATS)  # QLoRA on its checkpoint
        if train and self.lora is None and self.weights_dtype not in (None, dtype):
            raise SpecError("weights_dtype", f"{self.weights_dtype}: training stores the weights in the compute "
                                             f"dtype ({dtype}); other weights train only as a frozen base under "
                                             "LoRA adapters (QLoRA)")
        seq = self.seq or cfg.context_length
        text, image_size = self.text, self.image_size
        if self.images:  # the images' tokens join the text's (resolved once: ``text`` set)
            if cfg.vision is None:
                raise SpecError("images", f"{cfg.name} has no vision tower")
            from .model.vision import image
            img = image(cfg.vision, self.image_size)
            tokens = self.images * img.tokens
            if self.text is not None:
                if self.text + tokens != seq:
                    raise SpecError("text", f"is resolve's (the text tokens of seq beside its images), got "
                                            f"{self.text:,} beside {tokens:,} image tokens in seq {seq:,}: leave it "
                                            "unset")
            else:
                if self.seq is None:  # no seq: the text fills what the images leave of the context
                    if tokens >= seq:
                        raise SpecError("images", f"{self.images:,} of {img.tokens:,} tokens each fill {cfg.name}'s "
                                                  f"context length ({seq:,}), leaving no text: give the text's tokens "
                                                  "(--seq)")
                    seq -= tokens
                text, image_size = seq, img.size
                seq += tokens
        weights = self.weights_dtype or (cfg.dtype if stored else dtype)
        if weights in FORMATS and weights != cfg.dtype:  # a checkpoint's own format keeps its own skip list
            kept = FORMATS[weights].kept()
            if not any(quantized(m.key, kept) for m, _ in build(cfg).linears()):  # MXFP4 on a model without experts
                raise SpecError("weights_dtype", f"{weights} quantizes none of {cfg.name}'s matrices: it keeps "
                                                 f"{', '.join(kept)} in the compute dtype")
        if fp8 and weights not in FLOAT_DTYPES and not fp8_weights(weights):
            raise SpecError("dtype", f"fp8 (matmuls in fp8) reads float or fp8 weights, got {weights}: give "
                                     "--weights-dtype bf16 or an fp8 format")
        if self.lora is not None and (why := lora_refusal(cfg)) is not None:
            raise SpecError("lora", why)
        if self.lora is not None:
            targeted(cfg, self.lora)  # SpecError naming a target the model lacks
        layout = self.layout  # an inference pass: one batch through the pipeline unless more are in flight
        if not train and layout.micro_batches is None:
            layout = dataclasses.replace(layout, micro_batches=1)
        return dataclasses.replace(
            self, seq=seq, text=text, image_size=image_size, dtype=dtype, layout=layout,
            matmul_dtype="fp8" if fp8 else self.matmul_dtype or dtype, weights_dtype=weights,
            fp8_scaling=self.fp8_scaling or (None if not fp8 else "tensorwise" if train
                                             else FP8_SCALES.get(weights, "tensorwise")),
            kv_dtype=self.kv_dtype or (None if train else dtype),
            grad_dtype=self.grad_dtype or (dtype if train else None),
            state_dtype=self.state_dtype or (None if train else self.kv_dtype or dtype))

    def _check_layout(self) -> None:
        if not isinstance(self.layout, Layout):
            raise SpecError("layout", f"must be a Layout, got {brief(self.layout)}")
        self._check_modes(_APPLIES_FIELDS[True], self.layout)

    def _check_modes(self, fields: tuple, holder: object) -> None:
        """Each of ``fields`` (:data:`APPLIES`', of ``holder``) at its default unless it applies to the mode."""
        for field, name, default, modes in fields:
            if getattr(holder, name) != default and self.mode not in modes:
                raise SpecError(field, f"applies to mode {' or '.join(modes)} only")

    def replace(self, **changes) -> "RunSpec":
        """``dataclasses.replace``, checked as it is (no unknown field, :meth:`__post_init__`'s rules),
        without its generic ``__init__``: `plan` makes thousands of runs, most of them a layout apart."""
        unknown = changes.keys() - self.__dataclass_fields__.keys()
        if unknown:
            raise TypeError(f"RunSpec has no field {', '.join(sorted(unknown))}")
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__, **changes)
        if changes.keys() == {"layout"}:  # the rest was checked when this run was made
            new._check_layout()
        else:
            new.__post_init__()
        return new

    def executed(self) -> "RunSpec":
        """Counted as kernels execute it: flash skips the masked blocks, eager computes them all."""
        return self.replace(causal=self.attention == "flash")

    def one_device(self, function: str, expert_group: bool = False) -> None:
        """SpecError unless the run is on one device: ``function`` gives one model replica's figures
        (the per-GPU ones under a layout: :mod:`analysis.cluster`). ``expert_group``: or one GPU of an
        expert-parallel group (``dp = ep``, nothing else split), whose pass reads the experts it holds."""
        layout = self.layout
        if expert_group and layout.dp == layout.ep == layout.gpus and not layout.zero:
            return
        if not layout.trivial:
            raise SpecError("layout", f"{self.layout.describe()}: {function} runs one model replica on one GPU "
                                      "(per GPU under a layout: memory() and step())")

    def no_images(self) -> None:
        """SpecError unless the run has no images: the caller does not count the vision tower's
        activations, bytes moved or time (``count_flops`` and ``kv_cache`` take images)."""
        if self.images:
            raise SpecError("images", "(the vision tower's activations, bytes moved and time) are not counted by "
                                      "memory, time and plan yet: flops and kvcache (without --budget) take images")

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
            raise SpecError("seq", "is unset: call resolve(cfg) first")
        return self.seq


def runs(mode: str, batches: tuple[int, ...], **options) -> tuple[RunSpec, dict[int, Layout]]:
    """The run of a sweep over ``batches`` and each batch's layout (:meth:`Layout.of`: a global batch
    sets its micro-batches per step): ``options`` are RunSpec's fields but mode, seq and batch (left
    for each workload to set), and the rest Layout.of's keywords but batch and mode."""
    layout = {k: options.pop(k) for k in list(options) if k not in RunSpec.__dataclass_fields__}
    layouts = {b: Layout.of(**layout, batch=b, mode=mode) for b in batches}
    return RunSpec(mode, **options), layouts


# RunSpec's choices and the mode-bound fields of APPLIES (with their defaults; the run's and its layout's
# apart), laid out once: a run is checked each time one is made
_CHOICES = (("mode", MODES), ("attention", ATTENTION_IMPLS), ("optimizer", tuple(OPTIMIZER_STATES)),
            ("recompute", RECOMPUTE), ("dtype", (None, *COMPUTE_DTYPES)), ("matmul_dtype", (None, *COMPUTE_DTYPES)),
            ("fp8_scaling", (None, *FP8_SCALINGS)), ("weights_dtype", (None, *DTYPE_BITS, *WEIGHT_FORMATS)),
            ("kv_dtype", (None, *DTYPE_BITS)), ("state_dtype", (None, *DTYPE_BITS)),
            ("grad_dtype", (None, *GRAD_DTYPES)))
_APPLIES_FIELDS = {in_layout: tuple(
    (field, name, holder.__dataclass_fields__[name].default, modes)
    for field, modes in APPLIES.items()
    for owner, _, name in [field.rpartition(".")]
    if bool(owner) == in_layout
    for holder in [Layout if owner else RunSpec]
    if name in holder.__dataclass_fields__) for in_layout in (False, True)}  # global_batch is Layout.of's
_DEFAULTS = {field: default for fields in _APPLIES_FIELDS.values() for field, _, default, _ in fields}
_DEFAULTS["global_batch"] = None  # Layout.of's: no global batch, pp micro-batches per step
