"""`llmcalc verify`: check the analytic figures against real PyTorch modules.

The modules of ``analysis.verify`` that import torch are imported inside the command once the
command line is known to be good: torch is the optional heavy part (the verify extra)."""

import dataclasses
import gc
from contextlib import closing
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer
from rich.markup import escape
from rich.progress import Progress

from ..analysis.perf.hardware import for_device, load_hardware
from ..analysis.spec import Layout
from ..analysis.verify import cuda_device, torch_problem
from .caches import temporary_cache
from .common import lora_models, lora_record, lora_spec, lora_tag, one_or_list, warn_past_context
from .errors import UsageError, VerificationFailed
from .format import count
from .junit import write_junit
from .options import (
    WORKLOAD,
    Cp,
    Dp,
    Ep,
    Format,
    Json,
    LoraAlpha,
    LoraRank,
    LoraTargets,
    Models,
    Pp,
    Sp,
    Tp,
    Zero,
    hardware_option,
    output_format,
    whole,
)
from .report import Col, Report, Table, emit, pick, text_col, verdict
from .terminal import console, warn

DEVICES = ("auto", "meta", "cpu", "cuda")
AGAINST = ("transformers",)
DEFAULT_SEQ = 128  # tokens a check runs at unless --seq says


def _fmt(x) -> str:
    return count(x) if isinstance(x, int) else f"{x:.3g}"


def _difference(c) -> str:
    """Measured less analytic for counts; a float check's measured figure is itself a difference."""
    return _fmt(c.measured - c.analytic) if isinstance(c.analytic, int) else ""


def _columns(analytic: str, measured: str) -> list[Col]:
    return [text_col("check", key=True), Col(analytic), Col(measured), Col("difference"), Col("verdict")]


def _csv(records: list[dict], *extra: str) -> list[dict]:
    """A row per check of each model, named as the JSON's keys."""
    return [{**pick(r, "model", "device", "hardware", "against", "seq_len", "batch"),
             **pick(c, "name", "analytic", "measured", "ok", *extra)} for r in records for c in r["checks"]]


def _table(checks: list, measured: str, title: str) -> Table:
    rows = [(c.name, _fmt(c.analytic), _fmt(c.measured), _difference(c), verdict(c.ok)) for c in checks]
    return Table(_columns("analytic", measured), [rows], f"{title}: {sum(c.ok for c in checks)}/{len(checks)} "
                 "checks pass")


def _conclude(records: list[dict], models: Optional[list[str]], csv: list[dict], blocks: list, fmt: str,
              junit: Optional[Path]) -> None:
    """Print the report (and write the JUnit file); exit 1 when any check failed."""
    if junit is not None:
        write_junit(junit, records)
    emit(Report(one_or_list(records, models), csv, blocks), fmt)
    failed = [f"{r['model']} {c['name']}" for r in records for c in r["checks"] if not c["ok"]]
    if failed:
        total = sum(len(r["checks"]) for r in records)
        raise VerificationFailed(f"{len(failed)} of {total:,} checks failed: {', '.join(failed)}")


def _record(cfg, checks: list, notes: bool = False, **fields) -> dict:
    """One model's JSON record: its name, ``fields`` (device, workload), the verdict and the checks."""
    return {"model": cfg.name, **fields, "ok": all(c.ok for c in checks),
            "checks": [{"name": c.name, "analytic": c.analytic, "measured": c.measured, "ok": c.ok,
                        **({"note": c.note} if notes else {})} for c in checks]}


def _resolve_device(device: str) -> str:
    """auto: cuda when present, else cpu (the meta checks plus real tensors on the CPU)."""
    if device == "auto":
        return "cuda" if cuda_device() else "cpu"
    if device == "cuda" and not cuda_device():
        raise UsageError("--device cuda: no CUDA device is available (try --device meta or cpu)")
    return device


def _device_hardware(device: str):
    """The roofline the timed runs are compared with when --hardware is not given: on cuda the
    bundled spec of the device by its name; None on cpu (nothing is timed)."""
    if device != "cuda":
        return None
    name = cuda_device()
    spec = for_device(name)
    if spec is None:
        raise UsageError(f"--device cuda: {name!r} is not a bundled accelerator; pass --hardware NAME|FILE "
                         "(`llmcalc hardware`, or your own YAML)")
    return load_hardware(spec)


def verify(
    models: Models = None,
    device: Annotated[Literal[DEVICES], typer.Option(
        "--device", help="meta: shapes only, any size. cpu: meta checks plus real-tensor checks on a small copy. "
        "cuda: plus wall time, FLOP/s and peak memory. auto: cuda if present, else cpu.")] = "auto",
    seq: Annotated[Optional[int], typer.Option("--seq", parser=whole, metavar="N", rich_help_panel=WORKLOAD,
                                               help="Tokens per sequence for the FLOP checks (one value: verify "
                                                    "checks the formulas, it is not a sweep). Default: 128.")] = None,
    batch: Annotated[int, typer.Option("--batch", parser=whole, metavar="N", rich_help_panel=WORKLOAD,
                                       help="Sequences for the FLOP and KV-cache checks (one value).")] = 2,
    against: Annotated[Optional[Literal[AGAINST]], typer.Option(
        "--against", help="Check the analytic figures against transformers' own model for the model's Hugging Face "
        "config.json (built on meta: no weights, no network) instead of llmcalc's reference. Needs the hf "
        "extra.")] = None,
    hardware_spec: Annotated[Optional[str], hardware_option(
        "cuda, cpu: time prefill, a decode step and a training step and compare them with this accelerator's "
        "roofline. Default on cuda: the bundled spec of the device; on cpu nothing is timed without it.")] = None,
    tp: Tp = 1,
    cp: Cp = 1,
    pp: Pp = 1,
    dp: Dp = 1,
    ep: Ep = 1,
    zero: Zero = 0,
    sp: Sp = False,
    lora_rank: LoraRank = None,
    lora_alpha: LoraAlpha = None,
    lora_targets: LoraTargets = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", parser=whole, metavar="N", help="Models checked at once, "
                                      "each in its own process (every bundled model on meta: --jobs 2 takes about "
                                      "half the time on 2 cores).")] = 1,
    junit: Annotated[Optional[Path], typer.Option(
        "--junit", metavar="FILE", dir_okay=False, help="Also write the checks as JUnit XML, one test case per check "
        "(failures with analytic, measured and difference), for CI systems to show.")] = None,
    fmt: Format = "table",
    json_out: Json = False,
) -> None:
    """Check every analytic figure against a reference PyTorch model built from the same config.

    Checked: parameters, forward/backward matmul FLOPs (FlopCounterMode), bytes
    saved for backward, KV-cache bytes; on cpu also cached decode, rolling buffer, chunked
    prefill, GQA and RoPE on real tensors; on cuda also prefill, decode and a training step
    timed against the roofline (TFLOP/s, GB/s, fraction reached) and peak memory.
    Exit code 1 when any check fails.

    Examples:
      llmcalc verify gpt2-small --device cpu
      llmcalc verify mixtral-8x7b --device meta --json
      llmcalc verify --device meta      # every bundled model
      llmcalc verify --device meta --jobs 2 --junit verify.xml
      llmcalc verify mistral-7b --against transformers
      llmcalc verify gpt2-small --tp 2 --dp 2 --zero 3
      llmcalc verify mixtral-8x7b --lora-rank 8
    """
    fmt = output_format(fmt, json_out)
    gc.enable()  # the console script runs the analytic commands without it (cli/__main__.py); verify runs for long
    if against is not None:
        if device not in ("auto", "meta"):  # transformers' model is built on meta, whatever the machine
            warn(f"--device {device} does not apply to --against transformers (built on meta); ignored")
        if hardware_spec is not None:
            raise UsageError("--hardware does not apply to --against transformers (nothing is timed)")
    if hardware_spec is not None and device == "meta":
        raise UsageError("--hardware applies to --device cuda or cpu (meta runs no real tensors to time)")
    layout = Layout.of(tp, pp, dp, ep, zero, sp, cp, batch=batch)
    if zero and dp == 1:
        warn("--zero shards over --dp: without it there is nothing to shard; ignored")
    if not layout.trivial and (against is not None or hardware_spec is not None):
        raise UsageError("--tp/--dp check a layout on torch.distributed: not with --against or --hardware")
    lora = lora_spec(lora_rank, lora_alpha, lora_targets)
    if lora is not None:
        if against is not None or hardware_spec is not None or not layout.trivial:
            raise UsageError("--lora-rank checks adapters on one model on meta: not with --against, --hardware, "
                             "--tp or --dp")
        if device not in ("auto", "meta"):
            warn(f"--device {device}: the LoRA checks run on meta; ignored")
        device = "meta"
    cfgs = lora_models(models, lora)
    if seq is None:  # the checks' own size, whatever the context
        seq = DEFAULT_SEQ
    else:
        for cfg in cfgs:
            warn_past_context(cfg, seq)
    hw = None if hardware_spec is None else load_hardware(hardware_spec)
    if junit is not None and not junit.parent.is_dir():  # found out now, not once every check has run
        raise UsageError(f"--junit: no such directory {str(junit.parent)!r}")
    if jobs > 1 and (against is not None or not layout.trivial):
        warn("--jobs applies to the checks against llmcalc's reference: with --against or --tp/--dp the models "
             "are checked one at a time; ignored")
    with temporary_cache("TORCHINDUCTOR_CACHE_DIR"):  # before torch is imported (cli/caches.py)
        problem = torch_problem()
        if problem:
            raise UsageError(problem)
        from ..analysis.verify.meta_kernels import use_cpp_meta  # imports torch

        use_cpp_meta(True)  # the meta device on torch's C++ shape functions: the same shapes, faster
        if against is not None:
            return _verify_against(models, cfgs, seq, batch, fmt, junit)
        if not layout.trivial:
            if device not in ("auto", "cpu"):
                warn(f"--device {device} does not apply to a layout check (FSDP2 needs its shards on the cpu); "
                     "ignored")
            return _verify_layout(models, cfgs, layout, seq, batch, fmt, junit)
        _verify_reference(models, cfgs, device, hw, seq, batch, lora, jobs, fmt, junit)


def _verify_reference(models: Optional[list[str]], cfgs: list, device: str, hw, seq: int, batch: int, lora,
                      jobs: int, fmt: str, junit: Optional[Path]) -> None:
    """The checks against llmcalc's reference modules; ``hw``: --hardware's accelerator, if given."""
    from ..analysis.verify.report import verify_many  # imports torch

    dev = _resolve_device(device)
    hw = hw or _device_hardware(dev)
    results = []
    with closing(verify_many(cfgs, dev, seq, batch, hw, lora, jobs)) as checked:
        if len(cfgs) > 1:
            err = console(stderr=True)
            # a bar only on a terminal: elsewhere rich's Progress leaves an empty line behind
            with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
                task = progress.add_task("verifying", total=len(cfgs))
                for cfg in cfgs:  # results come in order: the bar names the next one awaited
                    progress.update(task, description=f"verifying {escape(cfg.name)}")
                    results.append((cfg, next(checked)))
                    progress.advance(task)
        else:
            results = [(cfgs[0], next(checked))]
    records = [_record(cfg, checks, device=dev, **({"hardware": hw.name} if hw else {}), seq_len=seq,
                       batch=batch) for cfg, checks in results]
    blocks: list = []
    for cfg, checks in results:
        blocks.append(_table(checks, "measured", f"{cfg.name}: verify on {dev} (seq {seq}, batch {batch}"
                             f"{lora_tag(lora_record(cfg, lora) if lora else None)})"))
        notes: dict[str, list[str]] = {}
        for c in checks:
            if c.note:
                notes.setdefault(c.note, []).append(c.name)
        blocks += [f"{', '.join(names)}: {note}" for note, names in notes.items()]
    blocks.append("Attention FLOPs on CPU: PyTorch counts 0 for the CPU flash-attention kernel; "
                  "llmcalc registers PyTorch's own SDPA formulas for it (backward includes the "
                  "score recomputation), and compares the fused kernel's scores+values backward "
                  "as one figure.")
    _conclude(records, models, _csv(records), blocks, fmt, junit)


def _verify_against(models: Optional[list[str]], cfgs: list, seq: int, batch: int, fmt: str,
                    junit: Optional[Path]) -> None:
    """`--against transformers`: transformers' model on meta for each model's HF config."""
    from ..analysis.verify import against  # imports torch

    specs = models or [cfg.name for cfg in cfgs]  # bundled configs are named as their files
    if not models:  # every bundled model that ships its Hugging Face config.json
        kept = [(spec, cfg) for spec, cfg in zip(specs, cfgs) if (against.HF_DIR / f"{spec}.json").exists()]
        skipped = [spec for spec in specs if spec not in {s for s, _ in kept}]
        if skipped:
            warn(f"no Hugging Face config.json shipped for {', '.join(skipped)}: not checked against transformers")
        specs, cfgs = [s for s, _ in kept], [c for _, c in kept]
    paths = [against.hf_config_path(spec) for spec in specs]
    raws = [against.read_hf_config(path) for path in paths]
    try:
        against.import_transformers()
    except against.TransformersMissing as exc:
        raise UsageError(str(exc)) from None
    results = [(cfg, against.against_transformers(cfg, raw, seq, batch, str(path)))
               for cfg, raw, path in zip(cfgs, raws, paths)]
    records = [_record(cfg, checks, notes=True, device="meta", against="transformers", seq_len=seq, batch=batch)
               for cfg, checks in results]
    blocks: list = []
    for cfg, checks in results:
        rows = [(c.name, _fmt(c.analytic), _fmt(c.measured), _fmt(c.measured - c.analytic), verdict(c.ok))
                for c in checks]
        blocks.append(Table(_columns("llmcalc", "transformers"), [rows],
                            f"{cfg.name}: verify against transformers on meta (seq {seq}, batch {batch}, eager "
                            f"attention): {sum(c.ok for c in checks)}/{len(checks)} checks pass"))
        blocks += [f"{cfg.name}: {c.name} differs: llmcalc {_fmt(c.analytic)}, transformers {_fmt(c.measured)}"
                   + (f" ({c.note})" if c.note else "") for c in checks if not c.ok]
    blocks.append("KV cache in transformers' convention: after a prefill of S tokens a sliding layer "
                  "keeps min(S, W - 1) tokens,")
    blocks.append("where llmcalc's rolling buffer holds W during the next decode step. "
                  "MLA caches the latent and the shared RoPE key in both.")
    _conclude(records, models, _csv(records, "note"), blocks, fmt, junit)


def _verify_layout(models: Optional[list[str]], cfgs: list, layout, seq: int, batch: int, fmt: str,
                   junit: Optional[Path]) -> None:
    """`--tp/--dp/--zero`: one training step of each model sharded on a fake process group."""
    from ..analysis.verify.distributed import check_layout_on_torch  # imports torch

    results = [(cfg, check_layout_on_torch(cfg, layout, seq, batch)) for cfg in cfgs]
    records = [_record(cfg, checks, device="cpu", layout=dataclasses.asdict(layout), gpus=layout.gpus,
                       seq_len=seq, batch=batch) for cfg, checks in results]
    blocks: list = [_table(checks, "torch", f"{cfg.name}: {layout.describe()} on torch.distributed (seq {seq}, "
                                              f"batch {batch})") for cfg, checks in results]
    blocks.append(f"One process as rank 0 of a fake process group of {layout.gpus} GPUs: DTensor tensor-parallel "
                  "plans and FSDP2 (fully_shard per layer, then the root); FSDP2 needs real shards, so one fp32 "
                  "training step ran on the CPU on small real tensors. Collectives as CommDebugMode counts them; "
                  "bytes are payloads (docs: \"Parallel layouts\", Conventions).")
    _conclude(records, models, _csv(records), blocks, fmt, junit)
