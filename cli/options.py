"""The options commands share, declared once for Typer: their types and choices (so ``--help`` lists
them and shell completion offers them), their help, and the help panel of their group (workload,
dtypes, parallel layout, LoRA, output). Choices come from ``analysis``, where the rules live.

Typer reads ints, floats, flags and choices itself; the values it has no type for are read by the
``parser`` functions here, which raise ``typer.BadParameter`` (one line: ``Invalid value for
'--budget': ...``): sizes (``80GiB``), fractions (``0.45``, ``45%``), amounts (``15e12``), comma
lists (``1024,4096``) and whole numbers from 1 to 2^53 (every figure stays exact).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from ..analysis import numbers
from ..analysis.errors import brief, shorten
from ..analysis.load.catalog import HARDWARE_DIR, bundled_files, bundled_names
from ..analysis.model.formats import WEIGHT_FORMATS
from ..analysis.model.sizes import COMPUTE_DTYPES, DTYPE_BITS, MAX_INT
from ..analysis.spec import (
    ATTENTION_IMPLS,
    FP8_SCALINGS,
    GRAD_DTYPES,
    MODES,
    OPTIMIZER_STATES,
    RECOMPUTE,
    ZERO_STAGES,
    drop_inapplicable,
)
from .errors import UsageError, flag
from .report import FORMATS
from .terminal import warn

WORKLOAD, DTYPES, LAYOUT, LORA, OUTPUT = "Workload", "Dtypes", "Parallel layout", "LoRA", "Output"


def shown(value: str) -> str:
    """A value as an error message quotes it: one printable line of at most 80 characters."""
    return repr(shorten(value))


# -- readers of the values Typer has no type for ------------------------------------------------

def whole(text: str | int, least: int = 1) -> int:
    """A whole number from ``least`` to 2^53 (``128k`` = 131,072)."""
    try:
        value = numbers.count(str(text))  # an int: the option's default
    except numbers.NumberError as exc:
        raise typer.BadParameter(f"{exc}, got {shown(str(text))}") from None
    if value < least:
        raise typer.BadParameter(f"must be >= {least}, got {value}")
    if value > MAX_INT:
        raise typer.BadParameter(f"must be <= 2^53 = {MAX_INT:,}, got {shorten(str(value))}")
    return value


class Counts(tuple):
    """Whole numbers from a comma list (``1024,4096``): a row for each."""


ONE = Counts((1,))  # --batch's default


def counts(text: str | Counts) -> Counts:
    if isinstance(text, Counts):  # a default, already read
        return text
    parts = text.split(",")
    glued = _thousands(parts)
    if glued is not None:
        raise typer.BadParameter(f"a comma separates entries of a list, got {shown(text)}: {glued} reads as one "
                                 f"number with a thousands separator; write {glued.replace(',', '')} (or 1k-style: "
                                 "32k, 128k), and a space after each comma between entries (8, 192)")
    return Counts(whole(part) for part in parts)


def _thousands(parts: list[str]) -> str | None:
    """The first run of a comma list that reads as one number with thousands separators (None: none does): an
    entry of three digits starting with 0 after a comma (1,024 is not 1 and 24), or 1 to 3 digits followed,
    comma by comma and without a space, by groups of three digits that together make a power of two (8,192;
    16,384). Other lists are lists: 128,256 and 64,128."""
    for i, part in enumerate(parts[1:], 1):
        if len(part.strip()) == 3 and part.strip().isdigit() and part.strip()[0] == "0":
            return f"{parts[i - 1].strip()},{part.strip()}"
    i = 0
    while i < len(parts):
        j = i + 1
        while j < len(parts) and len(parts[j]) == 3 and parts[j].isdigit():
            j += 1
        head = parts[i].strip()
        if j - i > 1 and head.isdigit() and len(head) <= 3 and head[0] != "0":
            n = int(head + "".join(parts[i + 1:j]))
            if n & (n - 1) == 0:
                return ",".join([head, *parts[i + 1:j]])
        i = j
    return None


class Names(tuple):
    """Names from a comma list (``attention/q,attention/v``)."""


def name_list(text: str) -> Names:
    return Names(n.strip() for n in text.split(",") if n.strip())


def size(text: str) -> int:
    """'80GiB', '80GB', '512MiB', '1e9B' -> bytes (analysis.numbers: GB = 10^9, GiB = 2^30; bits and
    bare numbers refused)."""
    try:
        value = numbers.size(text)
    except numbers.NumberError as exc:
        raise typer.BadParameter(f"{exc}, got {shown(text)}") from None
    if value > MAX_INT:
        raise typer.BadParameter(f"must be <= 2^53 = {MAX_INT:,} bytes, got {shown(text)}")
    if value < 1:
        raise typer.BadParameter(f"must be >= 1 byte, got {shown(text)}")
    return value


def fraction(text: str) -> float:
    """A fraction in (0, 1]: 0.45 or 45%."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise typer.BadParameter(f"expects a fraction such as 0.45 or 45%, got {shown(text)}") from None
    if not 0 < value <= 1:
        raise typer.BadParameter(f"must be in (0, 1], got {shown(text)}")
    return value


def amount(text: str) -> float:
    """A positive number: 15e12, 3000, 2_500.5."""
    try:
        value = float(text)
    except ValueError:
        raise typer.BadParameter(f"expects a positive number such as 3000 or 15e12, got {shown(text)}") from None
    if not 0 < value < float("inf"):
        raise typer.BadParameter(f"must be a positive number, got {shown(text)}")
    return value


# -- the options ---------------------------------------------------------------------------------

def _count_option(decl: str, help: str, panel: str = WORKLOAD, *more: str):
    return typer.Option(decl, *more, parser=whole, metavar="N", help=help, rich_help_panel=panel)


def _complete_models(incomplete: str) -> list[str]:
    """Shell completion of a bundled model's name (a shell completes a path where none matches)."""
    return [n for n in bundled_names() if n.startswith(incomplete)]


def _complete_hardware(incomplete: str) -> list[str]:
    return [n for n in bundled_files(HARDWARE_DIR) if n.startswith(incomplete)]


Models = Annotated[Optional[list[str]], typer.Argument(
    metavar="[MODEL]...", show_default=False, autocompletion=_complete_models,
    help="Bundled name (see `llmcalc models`), a YAML file, or a Hugging Face config.json. None: every bundled "
         "model.")]
Model = Annotated[str, typer.Argument(metavar="MODEL", autocompletion=_complete_models,
                                      help="A bundled name, a YAML file or a config.json.")]


def hardware_option(help: str):
    """--hardware: a bundled accelerator's name (completed by the shell) or a YAML file."""
    return typer.Option("--hardware", metavar="NAME|FILE", autocompletion=_complete_hardware, help=help)


def seqs_option(help: str = "Tokens per sequence, or a comma list (1024,4096,16384): a row for each. "
                            "Default: the model's context length."):
    return typer.Option("--seq", parser=counts, metavar="N[,N...]", help=help, rich_help_panel=WORKLOAD)


Seqs = Annotated[Optional[Counts], seqs_option()]
Batches = Annotated[Counts, typer.Option("--batch", parser=counts, metavar="N[,N...]", rich_help_panel=WORKLOAD,
                                         help="Sequences, or a comma list (1,8,32): a row for each.")]
# memory and time: with a parallel layout --batch is each GPU's micro-batch, hence the second name
MicroBatches = Annotated[Counts, typer.Option(
    "--batch", "--micro-batch", parser=counts, metavar="N[,N...]", rich_help_panel=WORKLOAD,
    help="Sequences (with a parallel layout: each GPU's micro-batch), or a comma list (1,8,32): a row for each.")]
Mode = Annotated[Literal[MODES], typer.Option("--mode", help="The workload.", rich_help_panel=WORKLOAD)]
Attention = Annotated[Literal[ATTENTION_IMPLS], typer.Option(
    "--attention", help="Attention kernel: eager (the score matrix) or flash (backward recomputes the scores).",
    rich_help_panel=WORKLOAD)]
Recompute = Annotated[Literal[RECOMPUTE], typer.Option(
    "--recompute", rich_help_panel=WORKLOAD, help="train: activation recomputation: none, selective (eager "
    "attention's core; nothing changes under flash), op (torchtitan's per-op checkpointing: every other linear's "
    "output and flash's kept, the rest rerun) or full (every layer).")]
AllLogits = Annotated[bool, typer.Option("--all-logits", help="prefill: logits at every position (scoring a text), "
                                         "not the last one's alone.", rich_help_panel=WORKLOAD)]
Optimizer = Annotated[Literal[tuple(OPTIMIZER_STATES)], typer.Option(
    "--optimizer", help="train: the optimizer's state per parameter.", rich_help_panel=WORKLOAD)]
Chunk = Annotated[Optional[int], _count_option("--chunk", "Chunked prefill: C tokens per chunk.")]
Images = Annotated[int, typer.Option(
    "--images", min=0, max=MAX_INT, metavar="N", rich_help_panel=WORKLOAD,
    help="Images per sequence (a multimodal checkpoint): each image's tokens join the --seq text tokens, and where "
         "FLOPs are counted the vision tower's join the forward.")]
ImageSize = Annotated[Optional[int], _count_option(
    "--image-size", "Pixels a side of each (square) image. Default: the vision tower's resolution.")]

Dtype = Annotated[Optional[Literal[COMPUTE_DTYPES]], typer.Option(
    "--dtype", rich_help_panel=DTYPES, help="Compute dtype. Default: bf16 for training; for inference the model's "
    "dtype, or bf16 when it is quantized. fp8: the layers' matmuls in fp8, the rest in bf16 (float8 training).")]
Fp8Scaling = Annotated[Optional[Literal[FP8_SCALINGS]], typer.Option(
    "--fp8-scaling", rich_help_panel=DTYPES, help="With --dtype fp8: torchao's scaling recipe, one scale a "
    "tensor (tensorwise, the default) or a scale per row (rowwise).")]
WeightsDtype = Annotated[Optional[Literal[(*DTYPE_BITS, *WEIGHT_FORMATS)]], typer.Option(
    "--weights-dtype", rich_help_panel=DTYPES, help="Stored weights: a dtype (int4: every weight in 4 bits) or a "
    "format with its scales (docs: Quantized weights). Default: the compute dtype for training, the model's for "
    "inference.")]
GradDtype = Annotated[Optional[Literal[GRAD_DTYPES]], typer.Option(
    "--grad-dtype", rich_help_panel=DTYPES, help="train: the dtype gradients are held, accumulated over "
    "micro-batches and reduced over data-parallel GPUs in (fp32: Megatron-LM's --bf16 default, torchtitan's FSDP). "
    "Default: the compute dtype.")]
KvDtype = Annotated[Optional[Literal[tuple(DTYPE_BITS)]], typer.Option(
    "--kv-dtype", help="KV-cache dtype (default: the compute dtype).", rich_help_panel=DTYPES)]
StateDtype = Annotated[Optional[Literal[tuple(DTYPE_BITS)]], typer.Option(
    "--state-dtype", help="Recurrent (mamba) layers' state dtype (default: the KV-cache dtype).",
    rich_help_panel=DTYPES)]

Tp = Annotated[int, _count_option("--tp", "Tensor-parallel GPUs (Megatron: heads, FFN width and vocabulary "
                                  "split).", LAYOUT)]
Cp = Annotated[int, _count_option("--cp", "Context-parallel GPUs: each sequence split over them (ring "
                                  "attention; flash, training and prefill).", LAYOUT)]
Pp = Annotated[int, _count_option("--pp", "Pipeline stages (1F1B); figures are the peak stage's unless noted.",
                                  LAYOUT)]
Vpp = Annotated[int, _count_option("--vpp", "train: model chunks per pipeline stage (interleaved 1F1B, Megatron's "
                                   "virtual pipeline stages); the micro-batches must be a multiple of --pp.", LAYOUT)]
Stage = Annotated[Optional[int], typer.Option(
    "--stage", parser=lambda text: whole(text, 0), metavar="S", rich_help_panel=LAYOUT,
    help="memory: the figures of a GPU of pipeline stage S (0 to --pp - 1) instead of the peak one's.")]
Dp = Annotated[int, _count_option("--dp", "Data-parallel GPUs; --batch is each GPU's micro-batch.", LAYOUT)]
Ep = Annotated[int, _count_option("--ep", "Expert-parallel GPUs, out of the data-parallel ones (MoE).", LAYOUT)]
Zero = Annotated[int, typer.Option("--zero", min=ZERO_STAGES[0], max=ZERO_STAGES[-1],
                                   metavar=f"{ZERO_STAGES[0]}-{ZERO_STAGES[-1]}", rich_help_panel=LAYOUT,
                                   help="ZeRO stage over --dp: 1 optimizer state, 2 also gradients, 3 (FSDP) "
                                        "also weights.")]
Sp = Annotated[bool, typer.Option("--sp", rich_help_panel=LAYOUT, help="Megatron sequence parallelism: "
                                  "residual-stream activations split over --tp.")]
AsyncTp = Annotated[bool, typer.Option("--async-tp", rich_help_panel=LAYOUT, help="torchtitan's asynchronous tensor "
                                       "parallelism: --sp's all-gathers and reduce-scatters overlapped with their "
                                       "matmuls.")]
GlobalBatch = Annotated[Optional[int], _count_option(
    "--global-batch", "train: sequences per step over all GPUs: sets the micro-batches per step, global / "
    "(batch x dp). Default: --pp of them. Inference (prefill, decode) with --pp: sequences in flight over all "
    "GPUs, global / (batch x dp) batches through the pipeline (default: one).", LAYOUT)]
Gpus = Annotated[Optional[int], _count_option("--gpus", "The GPUs the layout must use: tp x cp x pp x dp.", LAYOUT)]

LoraRank = Annotated[Optional[int], _count_option("--lora-rank", "Adapters of rank R on --lora-targets, on a "
                                                  "frozen base (docs: LoRA).", LORA)]
LoraAlpha = Annotated[Optional[float], typer.Option("--lora-alpha", metavar="ALPHA", rich_help_panel=LORA,
                                                    help="alpha (scaling alpha / R; default R).")]
LoraTargets = Annotated[Optional[Names], typer.Option(
    "--lora-targets", parser=name_list, metavar="KEY[,KEY...]", rich_help_panel=LORA,
    help="Breakdown keys, comma-separated (attention/q,attention/v, the default), or all-linear.")]

Format = Annotated[Literal[FORMATS], typer.Option(
    "--format", rich_help_panel=OUTPUT, help="CSV: raw integers, named as the JSON's keys.")]
Json = Annotated[bool, typer.Option("--json", help="Short for --format json: only JSON on stdout.",
                                    rich_help_panel=OUTPUT)]
Exact = Annotated[bool, typer.Option("--exact", help="Exact integers instead of units.", rich_help_panel=OUTPUT)]
Budget = Annotated[Optional[int], typer.Option(
    "--budget", parser=size, metavar="SIZE", help="One GPU's memory, with its unit: 80GiB (2^30 bytes), 80GB (10^9), "
    "512MiB. Reports the largest batch that fits.")]
ComputeEfficiency = Annotated[Optional[float], typer.Option(
    "--compute-efficiency", "--mfu", parser=fraction, metavar="FRACTION",
    help="Override: every kernel at this fraction of peak FLOP/s instead of the calibrated ones (the ideal stays at "
         "peak), e.g. 0.45. --mfu is its old name; MFU is a result.")]
BandwidthEfficiency = Annotated[Optional[float], typer.Option(
    "--bandwidth-efficiency", parser=fraction, metavar="FRACTION",
    help="Override: every kernel at this fraction of the memory bandwidth instead of the calibrated ones, e.g. 0.8.")]


def output_format(fmt: str, json_out: bool) -> str:
    """--format, with --json as its short form for json."""
    if json_out and fmt not in ("table", "json"):
        raise UsageError(f"--json means --format json; it cannot go with --format {fmt}")
    return "json" if json_out else fmt


def out_file(out: str, suffixes: tuple[str, ...], what: str, example: str, why: str = "") -> Path:
    """--out as the path of a ``what`` file ending in one of ``suffixes`` (``why`` after them in the
    message), refused before anything is computed when it cannot be: a directory, another suffix, a
    folder that does not exist."""
    path = Path(out)  # which drops a trailing separator: o.png/ names a directory, not the file o.png
    if out.endswith(tuple(filter(None, (os.sep, os.altsep)))) or path.is_dir():
        raise UsageError(f"--out {brief(out)} names a directory; name the {what}, such as {example}")
    if path.suffix.lower() not in suffixes:
        raise UsageError(f"--out must end in {' or '.join(suffixes)}{why}, got {brief(out)}")
    if not path.parent.is_dir():
        raise UsageError(f"--out: no such directory {brief(str(path.parent))}")
    return path


def applicable(modes: tuple[str, ...], label: str, **given) -> dict:
    """The options ``given`` as typed (RunSpec's fields, Layout.of's keywords), each that applies to
    none of ``modes`` warned about and at its default (analysis.spec.drop_inapplicable). ``label`` says what
    they do not apply to: the mode as the user gave it (``--mode inference``, a prefill), or what a command
    without --mode computes."""
    kept, ignored = drop_inapplicable(modes, **given)
    for field in ignored:
        warn(f"{flag(field)} does not apply to {label}; ignored")
    return kept
