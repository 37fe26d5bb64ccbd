"""`llmcalc plan`: the layouts of a training run on N GPUs, ranked by expected step time."""

import dataclasses
from typing import Annotated, Optional

import typer

from ..analysis.cluster.search import candidates, ranked
from ..analysis.cluster.sharding import one_gpu_only
from ..analysis.perf.calibration import Efficiency
from ..analysis.perf.hardware import load_hardware
from ..analysis.spec import RunSpec
from .common import MOE_TRAINING, dtypes_tag, expected_head, lora_models, lora_record, lora_spec, lora_tag
from .format import count, iec, rate, seconds
from .options import (
    WORKLOAD,
    BandwidthEfficiency,
    ComputeEfficiency,
    Dtype,
    Format,
    GradDtype,
    Json,
    LoraAlpha,
    LoraRank,
    LoraTargets,
    Model,
    Optimizer,
    WeightsDtype,
    hardware_option,
    output_format,
    whole,
)
from .report import Col, Report, Table, emit, pick, text_col
from .terminal import warn

TOP = 10  # layouts listed unless --top or --all says otherwise


def _record(c) -> dict:
    run, s = c.run, c.step
    rec = {"layout": dataclasses.asdict(run.layout), "micro_batch": run.batch, "recompute": run.recompute,
           "memory": c.memory.total, "memory_stage": c.memory.stage, "fits": c.fits}
    if s is not None:
        rec.update(step_s=s.time_s, **{f"{k}_s": v for k, v in s.parts_s.items()}, bubble=s.bubble,
                   sent_bytes=s.sent, tokens_per_s=s.tokens_per_s, mfu=c.mfu,
                   collectives=[{**k._asdict(), "sent": k.sent} for k in s.collectives],
                   expected={"step_s": s.expected.time_s, "parts_s": s.expected.parts_s,
                             "tokens_per_s": s.expected_tokens_per_s, "mfu": c.expected_mfu})
    return rec


def plan(
    model: Model,
    gpus: Annotated[int, typer.Option("--gpus", parser=whole, metavar="N", help="GPUs to split the run over.")],
    hardware_spec: Annotated[str, hardware_option(
        "A bundled accelerator (`llmcalc hardware`) or a YAML file; its memory, peaks and interconnect are used.")],
    global_batch: Annotated[int, typer.Option("--global-batch", parser=whole, metavar="N", rich_help_panel=WORKLOAD,
                                              help="Sequences per optimizer step over all GPUs.")],
    seq: Annotated[Optional[int], typer.Option("--seq", parser=whole, metavar="N", rich_help_panel=WORKLOAD,
                                               help="Tokens per sequence. Default: the model's context "
                                                    "length.")] = None,
    dtype: Dtype = None,
    weights_dtype: WeightsDtype = None,
    grad_dtype: GradDtype = None,
    lora_rank: LoraRank = None,
    lora_alpha: LoraAlpha = None,
    lora_targets: LoraTargets = None,
    optimizer: Optimizer = "adam",
    compute_efficiency: ComputeEfficiency = None,
    bandwidth_efficiency: BandwidthEfficiency = None,
    top: Annotated[int, typer.Option("--top", parser=whole, metavar="N",
                                     help="The best N layouts that fit, in every format.")] = TOP,
    every: Annotated[bool, typer.Option("--all", help="Every layout enumerated, each evaluated: JSON and CSV list "
                                        "them all, fitting or not, the table every one that fits (slower: seconds "
                                        "for MoE models on thousands of GPUs).")] = False,
    fmt: Format = "table",
    json_out: Json = False,
) -> None:
    """How to split a training run over --gpus GPUs, the layouts that fit ranked by expected step time.

    Every valid tensor-, pipeline-, data- and expert- and context-parallel layout with ZeRO stage,
    sequence parallelism, recomputation and micro-batch size; those that fit in the GPU's memory ranked
    by expected step time (calibrated compute, pipeline bubble, communication over NVLink or InfiniBand
    with its latency, data-parallel communication overlapped with compute), beside the ideal bound,
    with per-GPU memory, bytes sent per GPU and the expected MFU.

    Examples:
      llmcalc plan llama-3.1-70b --gpus 64 --hardware h100
        --seq 8192 --global-batch 512
      llmcalc plan mixtral-8x7b --gpus 16 --hardware h100
        --seq 4096 --global-batch 256 --json
      llmcalc plan qwen3-30b-a3b --gpus 8 --hardware h100
        --seq 4096 --global-batch 64 --lora-rank 16
    """
    fmt = output_format(fmt, json_out)
    eff = Efficiency(compute_efficiency, bandwidth_efficiency)
    lora = lora_spec(lora_rank, lora_alpha, lora_targets)
    (cfg,) = lora_models([model], lora)
    hw = load_hardware(hardware_spec)
    seq_value = seq or cfg.context_length
    workload = RunSpec("train", seq_value, dtype=dtype, weights_dtype=weights_dtype, lora=lora,
                       grad_dtype=grad_dtype).resolve(cfg)
    if every and top != TOP:
        warn("--all lists every layout: --top is ignored")
    if every:  # every layout's step figured
        listed = candidates(cfg, hw, gpus, seq_value, global_batch, dtype, eff, lora, weights_dtype, optimizer,
                            grad_dtype)
        fitting = [c for c in listed if c.fits]
        n_fit, n_found = len(fitting), len(listed)
    else:  # the best --top, the others figured no further than their bounds
        best = ranked(cfg, hw, gpus, seq_value, global_batch, top, dtype, eff, lora, weights_dtype, optimizer,
                      grad_dtype)
        listed, fitting, n_fit, n_found = best.best, best.best, best.fitting, best.weighed
    data = {"model": cfg.name, "hardware": hw.name, "gpus": gpus, "seq_len": seq_value, "global_batch": global_batch,
            **{k: getattr(workload, k) for k in ("dtype", "matmul_dtype", "weights_dtype", "grad_dtype")},
            **({"lora": lora_record(cfg, lora)} if lora else {}),
            "efficiency": {"mfu": 1.0},  # the ideal's
            "expected": expected_head(hw, eff), "fitting": n_fit, "enumerated": n_found,
            "layouts": [_record(c) for c in listed]}
    rows = []
    for rank, c in enumerate(fitting, 1):
        layout, s = c.run.layout, c.step
        rows.append((str(rank), str(layout.tp), str(layout.cp), str(layout.pp), str(layout.dp), str(layout.ep),
                     str(layout.zero), "yes" if layout.sp else "-",
                     "-" if c.run.recompute == "none" else c.run.recompute,
                     f"{count(c.run.batch)} x {count(layout.steps)}", iec(c.memory.total), iec(s.sent),
                     seconds(s.expected.time_s), seconds(s.time_s), f"{100 * s.bubble:.1f}%",
                     f"{s.expected_tokens_per_s:,.0f}", f"{100 * c.expected_mfu:.1f}%"))
    title = (f"{cfg.name} on {gpus:,} x {hw.name}: seq {count(seq_value)}, global batch {count(global_batch)}, "
             f"{dtypes_tag(workload)}{lora_tag(data.get('lora'))}, {n_fit:,} of {n_found:,} layouts fit")
    table = Table([Col("#", key=True), *map(Col, ("tp", "cp", "pp", "dp", "ep", "zero")), text_col("sp"),
                   text_col("recompute"), Col("micro-batches"), Col("memory/GPU"), Col("sent/GPU"), Col("step"),
                   Col("ideal"), Col("bubble"), Col("tokens/s"), Col("MFU")], [rows], title)
    notes = ["micro-batches: sequences per micro-batch x micro-batches per step; memory: the peak GPU's; "
             "sent/GPU: bytes one GPU sends per step (ring collectives, pipeline sends)",
             f"step: expected (calibrated compute, the 1F1B bubble, exposed communication over "
             f"{rate(hw.intra_node)} within a node of {hw.gpus_per_node or gpus} and {rate(hw.inter_node)} across "
             "nodes: docs \"Hardware\", Calibration), the ranking; ideal: at the peaks, data-parallel "
             "communication hidden by all the compute it runs beside, a bound; "
             "tokens/s and MFU expected"]
    if cfg.moe is not None:
        notes.append(MOE_TRAINING)
    if not n_found:
        notes.insert(0, f"no valid layout of {gpus:,} GPUs for {cfg.name}: the heads, layers or global batch do "
                        "not divide (docs: \"llmcalc plan\")")
    elif not n_fit:
        more = "" if one_gpu_only(cfg) else "more GPUs, "  # recurrent layers, ...: sized on one GPU only
        notes.insert(0, f"no layout fits in {iec(hw.memory)}: {more}a shorter --seq or a smaller --global-batch")
    csv = [{**pick(data, "model", "hardware", "gpus", "seq_len", "global_batch", "dtype", "matmul_dtype",
                   "weights_dtype", "grad_dtype"),
            **{f"layout.{k}": v for k, v in r["layout"].items()},
            **pick(r, "micro_batch", "recompute", "memory", "fits", "step_s", "bubble", "communication_s",
                   "sent_bytes", "tokens_per_s", "mfu"),
            **{f"expected_{k}": r.get("expected", {}).get(k) for k in ("step_s", "tokens_per_s", "mfu")}}
           for r in data["layouts"]]
    if not n_fit and fmt in ("json", "csv"):  # nothing listed: say why, as the table does
        warn(notes[0])
    emit(Report(data, csv, [table, *notes]), fmt)
