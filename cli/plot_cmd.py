"""`llmcalc plot`: charts of the analytic figures as PNG or SVG (matplotlib, the plot extra).

Every number comes from the analysis functions the flops, kvcache and memory commands call;
this module only picks the workloads and draws them. matplotlib is imported inside the command
and its drawing functions (the heavy optional import), once the arguments and the models are
known to be good: no other command imports it or needs it installed, and a failing plot leaves
nothing behind. Its config directory and font list go to a temporary directory (cli/caches.py),
so a plot writes the image and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from ..analysis.cluster.memory import memory
from ..analysis.count.flops import FAMILIES, count_flops, family
from ..analysis.count.kvcache import kv_cache
from ..analysis.count.memory import MEMORY_MODES, PARTS
from ..analysis.model.config import ModelConfig
from ..analysis.perf.float8 import serving
from ..analysis.perf.hardware import Hardware, load_hardware
from ..analysis.perf.roofline import roofline
from ..analysis.spec import ATTENTION_IMPLS, MODES, RunSpec
from .caches import temporary_cache
from .common import load_models, warn_past_context
from .errors import UsageError
from .options import Budget, Counts, KvDtype, Models, applicable, hardware_option, out_file, seqs_option, whole

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

KINDS = ("flops", "kvcache", "memory", "roofline")
PLOT_MODES = {"flops": MODES, "memory": tuple(MEMORY_MODES)}  # the kinds that take --mode
SUFFIXES = (".png", ".svg")
DPI = 100  # figure sizes are whole multiples of 0.25 in, so pixel sizes are exact
GIB = 2**30
LINESTYLES = ("-", "-.", ":")
# The options that mean something for each kind of chart; any other one given is a usage error.
KIND_OPTIONS = {"--mode": ("flops", "memory"), "--attention": ("flops", "memory", "roofline"),
                "--causal": ("flops",), "--kv-dtype": ("kvcache", "memory"), "--budget": ("kvcache", "memory"),
                "--hardware": ("roofline",)}
ROOFLINE_MODES = {"prefill": "o", "decode": "^"}  # mode -> marker


def default_seqs(context: int) -> list[int]:
    """Powers of two from 512 up to the context length, and the context length itself."""
    return [2**k for k in range(9, context.bit_length()) if 2**k < context] + [context]


def _tokens(n: float, _pos: object = None) -> str:
    """Axis label of a token count: 1024 -> 1k, 163840 -> 160k."""
    n = int(round(n))
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def _bytes(n: float, _pos: object = None) -> str:
    """Axis label of a power-of-two byte count: 512 MiB, 4 GiB."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def _log2_tokens(ax: Axes, label: str) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(_tokens))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(label)
    ax.grid(True, which="major", alpha=0.3)


def _budget_line(ax: Axes, budget_bytes: Optional[int], unit: int) -> None:
    """A horizontal line at the budget, on an axis counting ``unit`` bytes."""
    if budget_bytes is not None:
        ax.axhline(budget_bytes / unit, color="black", linestyle="--", linewidth=1.2,
                   label=f"budget {budget_bytes / GIB:,.4g} GiB")


def _panels(fig: Figure, n: int, sharey: bool = True) -> list[Axes]:
    """One panel per model, three a row; the grid's cells past the last model hidden."""
    cols = min(3, n)
    axes = list(fig.subplots(-(-n // cols), cols, squeeze=False, sharey=sharey).flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    return axes[:n]


def _flops(fig: Figure, cfgs: list[ModelConfig], seqs: Optional[Counts], run: RunSpec,
           budget_bytes: None) -> None:
    """One panel per model: each component family's share of the matmul FLOPs against seq
    (``budget_bytes``: always None, --budget does not apply to FLOPs)."""
    for cfg, ax in zip(cfgs, _panels(fig, len(cfgs))):
        points = _model_seqs(cfg, seqs)
        totals = [count_flops(cfg, run.replace(seq=s)).total for s in points]
        for name in FAMILIES:
            ax.plot(points, [100 * t.family_matmul(name) / t.matmul_total for t in totals],
                    marker="o", markersize=3, label=name)
        _log2_tokens(ax, "context (tokens per sequence)" if run.mode == "decode" else "sequence length (tokens)")
        ax.set_title(cfg.name)
        ax.set_ylim(0, 100)
        if ax.get_subplotspec().is_first_col():  # the panels share the y axis
            ax.set_ylabel("share of matmul FLOPs (%)")
    fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(FAMILIES))
    backward = f", {run.attention} backward" if run.mode == "train" else ""
    fig.suptitle(f"{run.mode} matmul FLOPs by component, batch {run.batch}, "
                 f"{'causal' if run.causal else 'dense'} attention{backward}")


def _kvcache(fig: Figure, cfgs: list[ModelConfig], seqs: Optional[Counts], run: RunSpec,
             budget_bytes: Optional[int]) -> None:
    """One line per model: the KV cache of every layer against the context (a window flattens it)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax = fig.subplots()
    dtypes = set()
    for i, cfg in enumerate(cfgs):
        points = _model_seqs(cfg, seqs)
        caches = [kv_cache(cfg, run.replace(seq=s)) for s in points]
        dtypes |= {c.kv_dtype for c in caches}
        ax.plot(points, [c.bytes for c in caches], marker="o", markersize=3, label=cfg.name,
                linestyle=LINESTYLES[i // 10 % len(LINESTYLES)])  # the palette has 10 colours
    _budget_line(ax, budget_bytes, 1)
    _log2_tokens(ax, "context (tokens per sequence)")
    ax.set_yscale("log", base=2)  # caches double with the context: one tick per doubling
    ax.yaxis.set_major_locator(LogLocator(base=2))
    ax.yaxis.set_major_formatter(FuncFormatter(_bytes))
    ax.set_ylabel("KV cache of every layer (bytes)")
    fig.legend(loc="outside right center")  # beside the axes: the lines fill them corner to corner
    ax.set_title(f"KV cache against context: batch {run.batch}, {', '.join(sorted(dtypes))}")


def _memory(fig: Figure, cfgs: list[ModelConfig], seqs: Optional[Counts], run: RunSpec,
            budget_bytes: Optional[int]) -> None:
    """One stacked bar per model: the parts of ``memory`` (those that are not 0 for every model)."""
    reports = []
    for cfg in cfgs:
        reports.append(memory(cfg, run.replace(seq=_one_seq(cfg, seqs))))
    ax = fig.subplots()
    rotate = len(cfgs) > 6  # more names than fit side by side
    sep = ", " if rotate else "\n"
    names = [f"{cfg.name}{sep}{_tokens(m.run.seq)} tokens" for cfg, m in zip(cfgs, reports)]
    bottom = [0.0] * len(cfgs)
    for part in PARTS:
        heights = [m.parts[part] / GIB for m in reports]
        if any(heights):
            ax.bar(names, heights, bottom=bottom, label=part.replace("_", " "))
            bottom = [b + h for b, h in zip(bottom, heights)]
    for x, m in enumerate(reports):
        ax.annotate(f"{m.total / GIB:,.1f}", (x, m.total / GIB), ha="center", va="bottom", fontsize=8)
    _budget_line(ax, budget_bytes, GIB)
    ax.set_ylabel("memory (GiB)")
    if rotate:
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", rotation_mode="anchor")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], loc="outside right center")  # top to bottom, as stacked
    workload = "training step" if run.mode == "train" else "inference (prefill)"
    fig.suptitle(f"Memory by part, {workload}: batch {run.batch}, {run.attention} attention")


def _roofline(fig: Figure, cfgs: list[ModelConfig], seqs: Optional[Counts], run: RunSpec,
              hw: Hardware) -> None:
    """One panel per model: each component of a prefill of S tokens and of the decode step at
    context S, at its arithmetic intensity (FLOPs per byte moved) and the FLOP/s its roofline time
    gives it, under the roofs min(peak, intensity x bandwidth) of the compute dtype and of fp32
    (elementwise work). Components that move no bytes or compute nothing have no point."""
    import numpy as np
    from matplotlib.lines import Line2D

    colours = dict(zip((*FAMILIES, "elementwise"), (f"C{i}" for i in range(len(FAMILIES) + 1))))
    for cfg, ax in zip(cfgs, _panels(fig, len(cfgs))):
        s = _one_seq(cfg, seqs)
        points = []
        for mode, marker in ROOFLINE_MODES.items():
            r = roofline(cfg, serving(cfg, run.replace(mode=mode, seq=s), hw), hw)  # fp8 weights: as time runs them
            points += [(c.intensity, c.flops_per_s, family(k), marker)
                       for k, c in r.components.items() if c.intensity]
        dtype, matmuls = r.run.dtype, r.run.matmul_dtype
        lo = min(p[0] for p in points) / 4
        hi = max(max(p[0] for p in points) * 4, 4 * hw.ridge(matmuls))
        x = np.geomspace(lo, hi, 200)
        roofs = ((dtype, "-"), ("fp32", "--")) + (((matmuls, ":"),) if matmuls != dtype else ())
        for peak_dtype, style in roofs:  # the roofline needs every peak its points run at
            ax.plot(x, [hw.attainable(peak_dtype, i) for i in x], color="black",
                    linestyle=style, linewidth=1.2, label=f"roof, {peak_dtype}")
        for intensity, rate, fam, marker in points:
            ax.scatter(intensity, rate, marker=marker, color=colours.get(fam, colours["elementwise"]), s=100,
                       alpha=0.8, edgecolors="none")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
        ax.set_title(f"{cfg.name}, {_tokens(s)} tokens")
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_subplotspec().is_first_col():
            ax.set_ylabel("attainable FLOP/s")
    roofs = {label: h for ax in fig.axes for h, label in zip(*ax.get_legend_handles_labels())}  # every panel's
    handles = [*roofs.values(),
               *(Line2D([], [], marker=m, linestyle="", color="grey", label=mode)
                 for mode, m in ROOFLINE_MODES.items()),
               *(Line2D([], [], marker="s", linestyle="", color=c, label=f) for f, c in colours.items())]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    fig.suptitle(f"Roofline on {hw.name}: prefill and one decode step, batch {run.batch}, {run.attention} attention")


def _one_seq(cfg: ModelConfig, seqs: Optional[Counts]) -> int:
    """--seq's one value (warned when past the context length), else the context length."""
    s = seqs[0] if seqs else cfg.context_length
    warn_past_context(cfg, s)
    return s


def _model_seqs(cfg: ModelConfig, seqs: Optional[Counts]) -> list[int]:
    """--seq as given (warned once when past the context length), else default_seqs."""
    if not seqs:
        return default_seqs(cfg.context_length)
    warn_past_context(cfg, max(seqs))
    return sorted(set(seqs))


DRAW = {"flops": _flops, "kvcache": _kvcache, "memory": _memory, "roofline": _roofline}


def _size(kind: str, n_models: int) -> tuple[float, float]:
    """Inches: a 5 x 3.5 panel per model (3 a row) for flops, wider bars for more models."""
    if kind in ("flops", "roofline"):
        cols, rows = min(3, n_models), -(-n_models // min(3, n_models))
        return max(7.0, 5.0 * cols), 3.5 * rows + (1.25 if kind == "flops" else 2.0)
    if kind == "memory":
        return max(7.0, 0.75 * n_models + 3.0), 5.5
    return 9.0, 5.5


def plot(
    kind: Annotated[Literal[KINDS], typer.Argument(metavar="KIND", help="The chart.")],
    models: Models = None,
    out: Annotated[str, typer.Option("--out", metavar="FILE", help="The image to write: FILE.png or FILE.svg.")] = ...,
    seq: Annotated[Optional[Counts], seqs_option(
        "Tokens per sequence, a comma list for flops and kvcache. Default: powers of two from 512 to each model's "
        "context length (flops, kvcache); the context length (memory, roofline).")] = None,
    batch: Annotated[int, typer.Option("--batch", parser=whole, metavar="N",
                                       help="Sequences (one value: the chart's workload).")] = 1,
    mode: Annotated[Optional[Literal[(*MODES, "inference")]], typer.Option(
        "--mode", help="flops: train | prefill | decode; memory: train | inference. Default: train.")] = None,
    attention: Annotated[Optional[Literal[ATTENTION_IMPLS]], typer.Option(
        "--attention", help="flops, memory, roofline: eager | flash (default).")] = None,
    causal: Annotated[bool, typer.Option("--causal", help="flops: count only unmasked query-key pairs.")] = False,
    kv_dtype: KvDtype = None,
    budget: Budget = None,
    hardware_spec: Annotated[Optional[str], hardware_option(
        "roofline (required): a bundled accelerator (`llmcalc hardware`) or a YAML file.")] = None,
) -> None:
    """Charts: FLOP shares against sequence length, KV cache against context, memory by part,
    and each component under an accelerator's roofline.

    Examples:
      llmcalc plot flops gpt2-xl llama-3.1-8b --out flops.png
      llmcalc plot kvcache mistral-7b llama-2-7b gemma-2-9b --batch 8 --budget 80GiB --out kv.svg
      llmcalc plot memory llama-2-7b mistral-7b --mode train --seq 4096 --out memory.png
      llmcalc plot roofline llama-3-8b --hardware h100 --seq 4096 --out roofline.png
    """
    path = out_file(out, SUFFIXES, "image file", "chart.png")
    given = {"--mode": mode, "--attention": attention, "--causal": causal or None, "--kv-dtype": kv_dtype,
             "--budget": budget, "--hardware": hardware_spec}
    for option, value in given.items():
        if value is not None and kind not in KIND_OPTIONS[option]:
            raise UsageError(f"{option} does not apply to plot {kind}")
    if mode is not None and mode not in PLOT_MODES[kind]:
        raise UsageError(f"--mode of plot {kind} must be one of {', '.join(PLOT_MODES[kind])}, got {mode!r}")
    if kind in ("memory", "roofline") and seq is not None and len(seq) > 1:  # one bar or panel per model
        raise UsageError(f"--seq takes one value for plot {kind}")
    # the kind's own input: --budget in bytes (kvcache, memory), or roofline's --hardware
    extra: Optional[int | Hardware] = budget
    attention = attention or "flash"
    if kind == "flops":
        run = RunSpec(mode or "train", None, batch, attention, causal)
    elif kind == "kvcache":
        run = RunSpec("decode", None, batch, kv_dtype=kv_dtype)
    elif kind == "roofline":
        if hardware_spec is None:
            raise UsageError("plot roofline needs --hardware NAME|FILE (`llmcalc hardware`)")
        extra = load_hardware(hardware_spec)
        run = RunSpec("prefill", None, batch, attention)
    else:
        memory_mode = mode or "train"
        kv = applicable((MEMORY_MODES[memory_mode],), f"--mode {memory_mode}", kv_dtype=kv_dtype)["kv_dtype"]
        run = RunSpec(MEMORY_MODES[memory_mode], None, batch, attention, kv_dtype=kv)
    cfgs = load_models(models)
    with temporary_cache("MPLCONFIGDIR"):  # before matplotlib is imported (cli/caches.py)
        try:
            # A Figure of its own, not pyplot: no GUI backend, no global state. `import matplotlib.figure`
            # imports the package itself first, so a missing matplotlib fails here.
            import matplotlib.figure
        except ImportError:
            raise UsageError("llmcalc plot needs matplotlib: pip install matplotlib (from llmcalc's source tree: "
                             "pip install -e '.[plot]')") from None
        fig = matplotlib.figure.Figure(figsize=_size(kind, len(cfgs)), dpi=DPI, layout="constrained")
        DRAW[kind](fig, cfgs, seq, run, extra)
        fig.savefig(path, dpi=DPI)
    print(f"wrote {out}")
