"""Options and model loading shared by every command."""

from __future__ import annotations

from typing import Optional

from ..analysis.config import MAX_INT, ModelConfig, bundled_names, load_model
from ..analysis.errors import shorten
from ..analysis.params import ParamCount, count_params
from .errors import UsageError
from .options import Argument, Option
from .render import FORMATS, count, warn

ModelsArg = Argument(
    None, metavar="[MODEL]...",
    help="Bundled name (see `llmcalc models`), a YAML file, or a Hugging Face config.json. "
         "None: every bundled model.")
FormatOpt = Option("table", "--format",
                   help="table | json | csv | markdown. CSV: raw integers, named as the JSON's keys.")
JsonOpt = Option(False, "--json", help="Short for --format json: only JSON on stdout.")
BatchOpt = Option("1", "--batch", help="Sequences, or a comma list (1,8,32): a row for each.")
# memory and time: with a parallel layout --batch is each GPU's micro-batch, hence the second name
MicroBatchOpt = Option("1", "--batch", "--micro-batch", help="Sequences (with a parallel layout: each GPU's "
                       "micro-batch), or a comma list (1,8,32): a row for each.")
ExactOpt = Option(False, "--exact", help="Exact integers instead of units.")


def family(cfg: ModelConfig) -> str:
    """The leading all-letter words of the name: ``llama-3.1-8b`` -> ``llama``, ``gpt2-xl`` ->
    ``gpt``, ``gpt-oss-20b`` -> ``gpt-oss``."""
    import re

    return re.match(r"[a-z]*(?:-[a-z]+(?![a-z0-9]))*", cfg.name.lower()).group(0) or cfg.name


def family_order(cfg: ModelConfig) -> tuple[str, int]:
    return family(cfg), params_of(cfg).total


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
    return sorted((load_model(n) for n in bundled_names()), key=family_order)


def one_or_list(items: list, specs: Optional[list[str]]):
    """JSON shape: an object for one model named on the command line with one workload (one
    --seq, one --batch), else a list."""
    return items[0] if specs and len(items) == 1 else items


def output_format(fmt: str, json_out: bool) -> str:
    """--format, with --json as its short form for json."""
    choice(fmt, FORMATS, "--format")
    if json_out and fmt not in ("table", "json"):
        raise UsageError(f"--json means --format json; it cannot go with --format {fmt}")
    return "json" if json_out else fmt


def shown(value: str) -> str:
    """A value as an error message quotes it: one printable line of at most 80 characters
    (analysis.errors.shorten, as ConfigError does), so a pasted megabyte still gives one line."""
    return repr(shorten(value))


def parse_ints(text: str, option: str, single: str | None = None) -> list[int]:
    """A comma list of positive integers (1_000 and 1000 alike). ``single``: the command
    that takes one value only (its message says why)."""
    parts = text.split(",")
    if single and len(parts) > 1:
        raise UsageError(f"{option} takes one value for {single}, got {shown(text)}")
    out = []
    for part in parts:
        try:
            value = int(part)
        except ValueError:
            kind = "a positive integer" if single else "positive integers (a comma list)"
            raise UsageError(f"{option} expects {kind}, got {shown(part)}") from None
        out.append(positive(value, option))
    return out


def parse_seqs(text: Optional[str]) -> list[Optional[int]]:
    """--seq as a list; [None] (each model's context length) when not given."""
    return [None] if text is None else [*parse_ints(text, "--seq")]


def workloads(cfgs: list[ModelConfig], seqs: list[Optional[int]], batches: list[int]):
    """Every (model, seq, batch) of a sweep, in that order; a missing seq is the model's context
    length, and a seq past it is computed with a warning (once per model and seq)."""
    for cfg in cfgs:
        for s in seqs:
            s = s or cfg.context_length
            warn_past_context(cfg, s)
            for b in batches:
                yield cfg, s, b


def positive(value: int, option: str) -> int:
    """1 to 2^53, the integers a config may hold (analysis.config.MAX_INT): every figure stays
    exact and within float range."""
    if value < 1:
        raise UsageError(f"{option} must be >= 1, got {shorten(str(value))}")
    if value > MAX_INT:
        raise UsageError(f"{option} must be <= 2^53 = {MAX_INT:,}, got {shorten(str(value))}")
    return value


def choice(value: str, choices: tuple[str, ...], option: str) -> str:
    if value not in choices:
        raise UsageError(f"{option} must be one of {', '.join(choices)}, got {shown(value)}")
    return value


def warn_past_context(cfg: ModelConfig, seq: int) -> None:
    if seq > cfg.context_length:
        warn(f"{cfg.name}: --seq {count(seq)} exceeds its context length ({count(cfg.context_length)}); "
             "computing anyway")


_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
               "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str, option: str = "--budget") -> int:
    """'80GiB', '80GB', '24G' (= GiB), '512MiB', '1e9B' -> bytes. GB = 10^9, GiB = 2^30. A bare
    number is refused: 80 bytes is never what was meant."""
    import re
    from fractions import Fraction

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if m and not m.group(2):
        number = m.group(1) if len(m.group(1)) <= 12 else "80"
        raise UsageError(f"{option} needs a unit: {number}GiB (2^30 bytes) or {number}GB (10^9 bytes), "
                         f"got {shown(text)}")
    if m is None or m.group(2).lower() not in _SIZE_UNITS:
        raise UsageError(f"{option} expects a size such as 80GiB, 80GB, 24G or 512MiB, got {shown(text)}")
    # exact arithmetic: 9007199254740993B is not 2^53, and 100.7B is not 100
    try:
        value = Fraction(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    except ValueError:  # past the 4,300 digits Python converts, so past 2^53 too
        value = Fraction(MAX_INT + 1)
    if value.denominator != 1:
        raise UsageError(f"{option} is not a whole number of bytes: {shown(text)}")
    if value > MAX_INT:
        raise UsageError(f"{option} must be <= 2^53 = {MAX_INT:,} bytes, got {shown(text)}")
    return positive(int(value), option)


def dtype_option(value: Optional[str], default: str, option: str) -> str:
    from ..analysis.config import DTYPE_BITS, WEIGHT_FORMATS

    formats = WEIGHT_FORMATS if option == "--weights-dtype" else ()
    return choice(value or default, (*DTYPE_BITS, *formats), option)


def checked_dtypes(dtype: Optional[str], weights_dtype: Optional[str], kv_dtype: Optional[str]) -> None:
    """The dtype options as given (None: RunSpec's defaults); compute must be a float type."""
    from ..analysis.config import FLOAT_DTYPES

    for value, option in ((dtype, "--dtype"), (weights_dtype, "--weights-dtype"), (kv_dtype, "--kv-dtype")):
        if value is not None:
            dtype_option(value, value, option)
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise UsageError(f"--dtype must be a float type ({', '.join(FLOAT_DTYPES)}) for compute, "
                         f"got {dtype!r}; quantized weights: --weights-dtype")


DtypeOpt = Option(None, "--dtype", help="Compute dtype (fp32 | bf16 | fp16). Default: bf16 for "
                  "training; for inference the model's dtype, or bf16 when it is quantized.")
WeightsDtypeOpt = Option(None, "--weights-dtype", help="Stored weights: a dtype (int4: every weight "
                         "in 4 bits) or a format with its scales, e.g. nf4-dq, gptq-int4, awq-int4, "
                         "fp8-block, mxfp4 (README \"Quantized weights\"). Default: the compute dtype "
                         "for training, the model's for inference.")
KvDtypeOpt = Option(None, "--kv-dtype", help="KV-cache dtype: fp32 | fp16 | bf16 | fp8 | int8 | int4 "
                    "(default: the compute dtype).")


TpOpt = Option(1, "--tp", help="Tensor-parallel GPUs (Megatron: heads, FFN width and vocabulary split).")
PpOpt = Option(1, "--pp", help="Pipeline stages (1F1B); figures are the peak stage's unless noted.")
DpOpt = Option(1, "--dp", help="Data-parallel GPUs; --batch is each GPU's micro-batch.")
CpOpt = Option(1, "--cp", help="Context-parallel GPUs: each sequence split over them (ring "
               "attention; flash, training and prefill).")
EpOpt = Option(1, "--ep", help="Expert-parallel GPUs, out of the data-parallel ones (MoE).")
ZeroOpt = Option(0, "--zero", help="ZeRO stage over --dp: 1 optimizer state, 2 also gradients, "
                 "3 (FSDP) also weights.")
SpOpt = Option(False, "--sp", help="Megatron sequence parallelism: residual-stream activations "
               "split over --tp.")
GlobalBatchOpt = Option(None, "--global-batch", help="Sequences per step over all GPUs: sets the "
                        "micro-batches per step, global / (batch x dp). Default: --pp of them.")
GpusOpt = Option(None, "--gpus", help="The GPUs the layout must use: tp x cp x pp x dp.")
RecomputeOpt = Option("none", "--recompute", help="train: activation recomputation: none, selective "
                      "(eager attention's core; nothing changes under flash) or full (every layer).")


def recomputation(recompute: str, mode: str) -> str:
    """--recompute checked; "none" outside training (the caller warns that it is ignored)."""
    from ..analysis.run import RECOMPUTE

    choice(recompute, RECOMPUTE, "--recompute")
    return recompute if mode == "train" else "none"


def recompute_tag(recompute: str) -> str:
    """A title's words for a recomputation: ", full recomputation"; nothing without one."""
    return "" if recompute == "none" else f", {recompute} recomputation"


def lora_tag(lora: dict | None) -> str:
    """A title's words for a JSON ``lora`` record: ", LoRA rank 16 on attention/q, attention/v"."""
    return "" if lora is None else f", LoRA rank {lora['rank']} on {', '.join(lora['targets'])}"


def parallel_layout(tp: int, pp: int, dp: int, ep: int, zero: int, sp: bool, global_batch: Optional[int],
                    gpus: Optional[int], batch: int, cp: int = 1):
    """The Layout of the parallel options, or UsageError naming the rule that failed."""
    from ..analysis.run import Layout

    for value, option in ((tp, "--tp"), (pp, "--pp"), (dp, "--dp"), (ep, "--ep"), (cp, "--cp")):
        positive(value, option)
    micro = None
    if global_batch is not None:
        positive(global_batch, "--global-batch")
        if global_batch % (batch * dp):
            raise UsageError(f"--global-batch {global_batch:,} must be a multiple of --batch x --dp "
                             f"({batch:,} x {dp:,})")
        micro = global_batch // (batch * dp)
    try:
        layout = Layout(tp, pp, dp, ep, zero, sp, micro, cp)
    except ValueError as exc:
        raise UsageError(f"invalid layout: {exc}") from None
    if gpus is not None and gpus != layout.gpus:
        raise UsageError(f"--gpus {gpus:,} must equal tp x cp x pp x dp = {layout.gpus:,}")
    return layout


def lora_spec(rank: Optional[int], alpha: Optional[float], targets: Optional[str]):
    """The LoRA of --lora-rank/--lora-alpha/--lora-targets, or None without a rank."""
    from ..analysis.lora import LoRA

    if rank is None:
        if alpha is not None or targets is not None:
            raise UsageError("--lora-alpha and --lora-targets need --lora-rank")
        return None
    positive(rank, "--lora-rank")
    if alpha is not None and not 0 < alpha < float("inf"):
        raise UsageError(f"--lora-alpha must be a positive number, got {alpha}")
    if targets is None:
        return LoRA(rank, alpha=alpha)  # its default targets
    names = tuple(t.strip() for t in targets.split(",") if t.strip())
    if not names:
        raise UsageError("--lora-targets needs at least one breakdown key, or all-linear")
    return LoRA(rank, names, alpha)


def lora_targets_of(cfg: ModelConfig, lora) -> list[str]:
    """The keys ``lora`` adapts in ``cfg``; UsageError for a target the model lacks."""
    from ..analysis.lora import targeted

    try:
        return targeted(cfg, lora)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def lora_models(models: Optional[list[str]], lora) -> list[ModelConfig]:
    """The models of the command line; with ``lora``, named models must have its targets
    (UsageError), and of every bundled model (no MODEL) those that lack them are left out, with a
    warning (DeepSeek's MLA has no attention/q)."""
    cfgs = load_models(models)
    if lora is None:
        return cfgs
    if models:
        for cfg in cfgs:
            lora_targets_of(cfg, lora)
        return cfgs
    kept: list[ModelConfig] = []
    left: list[str] = []
    for cfg in cfgs:
        if _has_targets(cfg, lora):
            kept.append(cfg)
        else:
            left.append(cfg.name)
    if left:
        warn(f"left out, without the LoRA targets {', '.join(lora.targets)}: {', '.join(left)}")
    return kept


def _has_targets(cfg: ModelConfig, lora) -> bool:
    try:
        lora_targets_of(cfg, lora)
    except UsageError:
        return False
    return True


def training_weights(weights_dtype: Optional[str], mode: str, lora) -> None:
    """UsageError for --weights-dtype in a full training run (the weights train in the compute
    dtype; stored weights are the frozen base of LoRA or QLoRA)."""
    if weights_dtype is not None and mode == "train" and lora is None:
        raise UsageError("--weights-dtype applies to training only as the frozen base of --lora-rank adapters "
                         "(LoRA, QLoRA): full training keeps the weights in the compute dtype")


def lora_record(cfg: ModelConfig, lora) -> dict:
    """The JSON's ``lora``: rank, alpha, scaling and the keys adapted in ``cfg``."""
    return {"rank": lora.rank, "alpha": lora.rank if lora.alpha is None else lora.alpha, "scaling": lora.scaling,
            "targets": lora_targets_of(cfg, lora)}


def lora_run(lora, mode: str):
    """``lora`` when it applies to ``mode``; UsageError for LoRA outside training."""
    if lora is not None and mode != "train":
        raise UsageError(f"LoRA adapters apply to --mode train, not {mode}")
    return lora


LoraRankOpt = Option(None, "--lora-rank", help="LoRA: adapters of rank R on --lora-targets, on a frozen "
                     "base (README \"LoRA adapters\").")
LoraAlphaOpt = Option(None, "--lora-alpha", help="LoRA: alpha (scaling alpha / R; default R).")
LoraTargetsOpt = Option(None, "--lora-targets", help="LoRA: breakdown keys, comma-separated "
                        "(attention/q,attention/v, the default), or all-linear.")
