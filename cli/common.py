"""What several commands do alike: load the models named on the command line (or every bundled
one), walk a sweep of sequence lengths and batches, shape the JSON, and build LoRA from its options."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Optional

from ..analysis.count.params import ParamCount, count_params
from ..analysis.errors import SpecError
from ..analysis.load.catalog import bundled_names, load_model
from ..analysis.model.config import ModelConfig
from ..analysis.spec import Layout, LoRA, RunSpec, targeted
from .errors import UsageError, flag
from .format import count
from .terminal import warn

if TYPE_CHECKING:  # time and plan import them; the commands without hardware start faster without them
    from ..analysis.perf.calibration import Efficiency
    from ..analysis.perf.hardware import Hardware


def family(cfg: ModelConfig) -> str:
    """The leading all-letter words of the name: ``llama-3.1-8b`` -> ``llama``, ``gpt2-xl`` ->
    ``gpt``, ``gpt-oss-20b`` -> ``gpt-oss``."""
    return re.match(r"[a-z]*(?:-[a-z]+(?![a-z0-9]))*", cfg.name.lower()).group(0) or cfg.name


# The counts of the configs load_models last gave, by id (each config held, so no id is reused):
# every bundled model is counted once to sort them, and not again to show them.
_counted: dict[int, tuple[ModelConfig, ParamCount]] = {}


def params_of(cfg: ModelConfig) -> ParamCount:
    """count_params(cfg), counted once for the configs of one command."""
    if id(cfg) not in _counted:
        _counted[id(cfg)] = (cfg, count_params(cfg))
    return _counted[id(cfg)][1]


def load_models(specs: Optional[list[str]]) -> list[ModelConfig]:
    """The configs named on the command line, or every bundled one (by family, then size)."""
    _counted.clear()
    if specs:
        return [load_model(s) for s in specs]
    return sorted((load_model(n) for n in bundled_names()), key=lambda c: (family(c), params_of(c).total))


def one_or_list(items: list, specs: Optional[list[str]]):
    """JSON shape: an object for one model named on the command line with one workload (one
    --seq, one --batch), else a list."""
    return items[0] if specs and len(items) == 1 else items


MAX_ROWS = 1_000  # of a sweep: each row costs milliseconds, and a table of more is not read


def workloads(cfgs: list[ModelConfig], seqs: Optional[tuple[int, ...]], batches: tuple[int, ...],
              new: int = 0, state_dtype: Optional[str] = None,
              run: Optional[RunSpec] = None) -> Iterator[tuple[ModelConfig, Optional[int], int]]:
    """Every (model, seq, batch) of a sweep, in that order; no seq is the model's context length (the
    text beside ``run``'s images, which fill the rest), and a sequence past it (with ``new`` tokens
    generated after it: a generation's prompt; with the images' tokens) is computed with a warning (once
    per model and seq), as is a ``state_dtype`` for a model without recurrent state (once per model). At
    most MAX_ROWS of them, counted before any is computed."""
    rows = len(cfgs) * len(seqs or (0,)) * len(batches)
    if rows > MAX_ROWS:
        raise UsageError(f"{len(cfgs)} model(s) x {len(seqs or (0,))} --seq x {len(batches)} --batch make "
                         f"{rows:,} rows: at most {MAX_ROWS:,}")
    images = run if run is not None and run.images else None
    for cfg in cfgs:
        if state_dtype is not None and not cfg.has_recurrent:
            warn(f"--state-dtype: {cfg.name} keeps no recurrent state; ignored")
        for s in seqs or (None if images else cfg.context_length,):  # None: RunSpec's default (the images')
            if s is not None:
                what = ("--prompt + --new" if new else "--seq") + (" + --images" if images else "")
                warn_past_context(cfg, (images.replace(seq=s).resolve(cfg).seq if images else s) + new, what)
            for b in batches:
                yield cfg, s, b


def splittable(cfgs: list[ModelConfig], run: RunSpec, every: bool) -> list[ModelConfig]:
    """The models ``run``'s layout can split (``run`` with the sweep's first seq). With ``every`` (no MODEL given:
    every bundled model), one it cannot split is left out with a warning naming the rule it breaks, and none left
    is an error naming the first; a model named stays, to be refused with its rule (exit 2)."""
    if not every or run.layout.trivial:
        return cfgs
    from ..analysis.cluster.sharding import check_layout  # here: only a layout pays its import

    out, left = [], []
    for cfg in cfgs:
        try:
            check_layout(cfg, run.resolve(cfg))
        except SpecError as e:
            if not e.field.startswith("layout."):
                raise
            left.append(f"{flag(e.field)} {e.message}")
            continue
        out.append(cfg)
    if not out:
        raise UsageError(f"no bundled model takes {run.layout.describe()} (the first: {left[0]})")
    for why in left:
        warn(f"left out: {why}")
    return out


def warn_past_context(cfg: ModelConfig, seq: int, what: str = "--seq") -> None:
    if seq > cfg.context_length:
        warn(f"{cfg.name}: {what} {count(seq)} exceeds its context length ({count(cfg.context_length)}); "
             "computing anyway")


def warn_idle(layout: Layout) -> None:
    """A warning for each layout option that changes nothing (:attr:`Layout.idle`)."""
    for field, why in layout.idle:
        warn(f"--{field} {getattr(layout, field)} {why}; ignored")


def recompute_tag(recompute: str) -> str:
    """A title's words for a recomputation: ", full recomputation", ", per-op recomputation"; nothing
    without one."""
    return "" if recompute == "none" else f", {'per-op' if recompute == 'op' else recompute} recomputation"


def lora_tag(lora: dict | None) -> str:
    """A title's words for a JSON ``lora`` record: ", LoRA rank 16 on attention/q, attention/v"."""
    return "" if lora is None else f", LoRA rank {lora['rank']} on {', '.join(lora['targets'])}"


def lora_spec(rank: Optional[int], alpha: Optional[float], targets: Optional[tuple[str, ...]]) -> Optional[LoRA]:
    """The LoRA of --lora-rank/--lora-alpha/--lora-targets, or None without a rank."""
    if rank is None:
        if alpha is not None or targets is not None:
            raise UsageError("--lora-alpha and --lora-targets need --lora-rank")
        return None
    return LoRA(rank, alpha=alpha) if targets is None else LoRA(rank, tuple(targets), alpha)


def lora_record(cfg: ModelConfig, lora: LoRA) -> dict:
    """The JSON's ``lora``: rank, alpha, scaling and the keys adapted in ``cfg``."""
    return {"rank": lora.rank, "alpha": lora.rank if lora.alpha is None else lora.alpha, "scaling": lora.scaling,
            "targets": targeted(cfg, lora)}


def lora_models(models: Optional[list[str]], lora: Optional[LoRA]) -> list[ModelConfig]:
    """The models of the command line; with ``lora``, named models must have its targets
    (SpecError), and of every bundled model (no MODEL) those that lack them are left out, with a
    warning."""
    cfgs = load_models(models)
    if lora is None:
        return cfgs
    if models:
        for cfg in cfgs:
            targeted(cfg, lora)
        return cfgs
    kept = [cfg for cfg in cfgs if _has_targets(cfg, lora)]
    left = [cfg.name for cfg in cfgs if cfg not in kept]
    if left:
        warn(f"left out, without the LoRA targets {', '.join(lora.targets)}: {', '.join(left)}")
    return kept


def _has_targets(cfg: ModelConfig, lora: LoRA) -> bool:
    try:
        targeted(cfg, lora)
    except SpecError:
        return False
    return True


def expected_head(hw: Hardware, eff: Efficiency) -> dict:
    """The JSON's ``expected`` of time and plan, what the expected figures assume: the hardware's
    calibration or the overrides."""
    return {"efficiency": {"compute": eff.compute, "bandwidth": eff.bandwidth},
            "calibration": hw.calibration.source or None}


def image_record(run) -> dict:
    """A resolved run's images as JSON keys (none without images): ``seq_len`` counts their tokens."""
    if not run.images:
        return {}
    return {"text_tokens": run.text, "images": run.images, "image_size": run.image_size,
            "image_tokens": (run.seq - run.text) // run.images}


def dtypes_tag(run: RunSpec) -> str:
    """The compute dtype, the matmuls' where they differ (--dtype fp8), and the weights' and gradients' where
    they differ (--weights-dtype, a format; --grad-dtype)."""
    weights = (f", {run.weights_dtype} weights" if run.weights_dtype != run.dtype else "") + (
        f", {run.grad_dtype} gradients" if run.grad_dtype not in (None, run.dtype) else "")
    if run.matmul_dtype == run.dtype:
        return run.dtype + weights
    return (f"{run.matmul_dtype} matmuls ({run.fp8_scaling}), {run.dtype}" if run.fp8_scaling else
            f"{run.matmul_dtype} matmuls, {run.dtype}") + weights


# under an MoE training step's expected time (time, plan): what it leaves out, which the held-out runs show
MOE_TRAINING = ("MoE training: the expected step counts the experts' GEMMs, the tokens' permutation and the "
                "all-to-alls, not padding, load imbalance or grouped-GEMM scheduling; Megatron's published MoE runs "
                "are slower than it predicts (docs: llmcalc time, Held-out runs)")
