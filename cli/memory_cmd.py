"""`llmcalc memory`: training and inference memory, part by part."""

import dataclasses
from typing import Annotated, Literal, Optional

import typer

from ..analysis.cluster.memory import fit
from ..analysis.cluster.memory import memory as memory_report
from ..analysis.count.memory import MEMORY_MODES, PARTS, MemoryReport
from ..analysis.model.config import ModelConfig
from ..analysis.perf.hardware import load_hardware
from ..analysis.spec import Layout, runs
from .common import (
    lora_models,
    lora_record,
    lora_spec,
    lora_tag,
    one_or_list,
    recompute_tag,
    splittable,
    warn_idle,
    workloads,
)
from .errors import UsageError
from .format import count, iec, share
from .options import (
    ONE,
    WORKLOAD,
    AllLogits,
    Attention,
    Budget,
    Chunk,
    Cp,
    Dp,
    Dtype,
    Ep,
    Exact,
    Format,
    GlobalBatch,
    Gpus,
    GradDtype,
    Images,
    ImageSize,
    Json,
    KvDtype,
    LoraAlpha,
    LoraRank,
    LoraTargets,
    MicroBatches,
    Models,
    Optimizer,
    Pp,
    Recompute,
    Seqs,
    Sp,
    Stage,
    StateDtype,
    Tp,
    Vpp,
    WeightsDtype,
    Zero,
    applicable,
    hardware_option,
    output_format,
)
from .report import Col, Report, Table, emit, pick, text_col


def memory_json(cfg: ModelConfig, m: MemoryReport, mode: str) -> dict:
    run = m.run
    out = {"model": cfg.name, "mode": mode, "seq_len": run.seq, "batch": run.batch, "dtype": run.dtype,
           "weights_dtype": run.weights_dtype, "kv_dtype": run.kv_dtype, "state_dtype": run.state_dtype,
           "grad_dtype": run.grad_dtype, "attention_impl": run.attention, "recompute": run.recompute, **m.parts,
           "total": m.total}
    if run.mode == "prefill":
        out.update(chunk=run.chunk, all_logits=run.all_logits)
    if run.lora is not None:
        out["lora"] = lora_record(cfg, run.lora)
    if not run.layout.trivial:
        lay = run.layout
        out.update(gpus=lay.gpus, layout={**dataclasses.asdict(lay), "micro_batches": lay.steps},
                   stage=m.stage, peak_stage=m.peak_stage, stage_totals=list(m.stage_totals))
        if mode == "train":
            out["activation_components"] = m.activation_components
        return out
    if mode == "train":
        out.update(activations_per_layer=max(m.activations_per_layer.values()),
                   activation_components=m.activation_components,
                   activation_layer_groups=m.activations_per_layer,
                   korthikanti_per_layer=m.korthikanti_per_layer)
    else:
        out.update(attention_queries=m.attention_queries, attention_keys=m.attention_keys)
    return out


def _budget(budget: Optional[int], hardware_spec: Optional[str]) -> tuple[Optional[int], Optional[str]]:
    """(bytes, accelerator name) of --budget or --hardware; (None, None) without either."""
    if budget is not None and hardware_spec is not None:
        raise UsageError("--budget and --hardware both give the memory to fit in: use one")
    if hardware_spec is not None:
        hw = load_hardware(hardware_spec)
        return hw.memory, hw.name
    return budget, None


def _budget_label(b: dict) -> str:
    return f"{iec(b['bytes'])}" + (f" ({b['hardware']})" if b["hardware"] else "")


def _per_gpu(layout: Layout, stage: Optional[int]) -> str:
    """The title's note of a parallel layout ("" on one GPU), and of the stage asked for."""
    at = "" if stage is None or layout.pp == 1 else f", pipeline stage {stage}"
    return "" if layout.trivial else f"; per GPU of {count(layout.gpus)}: {layout.describe()}{at}"


def _explain(cfg: ModelConfig, m: dict, fmt, per_gpu: str) -> Report:
    """One model and workload: a row per part (CSV: every part, zero or not)."""
    rows = [(k, fmt(m[k]), share(m[k], m["total"])) for k in PARTS if m[k]]
    title = (f"{cfg.name}: {m['mode']} memory, batch {count(m['batch'])} x seq {count(m['seq_len'])}, "
             f"{m['dtype']}" + (f", {m['weights_dtype']} weights" if m["weights_dtype"] != m["dtype"] else "")
             + (f", {m['grad_dtype']} gradients" if m["grad_dtype"] not in (None, m["dtype"]) else "")
             + f", {m['attention_impl']} attention" + recompute_tag(m["recompute"]) + lora_tag(m.get("lora"))
             + per_gpu)
    blocks: list = [Table([text_col("part", key=True), Col("bytes"), Col("share")], [rows], title,
                          footer=["total", fmt(m["total"]), "100.0%"])]
    if "budget" in m:
        b = m["budget"]
        room = f"yes, {fmt(b['free'])} free" if b["fits"] else f"no, {fmt(-b['free'])} over"
        largest = count(b["max_batch"]) if b["max_batch"] else "none (not even 1)"
        peak = f" (the peak GPU, stage {m['peak_stage']})" if m.get("stage", 0) != m.get("peak_stage", 0) else ""
        blocks.append(f"fits in {_budget_label(b)}{peak}: {room}; the largest batch that fits: {largest}")
    if "layout" in m:
        lay = m["layout"]
        if lay["pp"] > 1:
            peak = m["peak_stage"]
            shown = "" if m["stage"] == peak else f"the figures are a GPU's of stage {m['stage']} (--stage); "
            blocks.append(f"{shown}the peak GPU is on pipeline stage {peak} of 0-{lay['pp'] - 1}; one GPU's total "
                          "by stage: " + ", ".join(fmt(t) for t in m["stage_totals"]))
        if m["mode"] == "train" and lay["pp"] > 1 and lay["vpp"] > 1:
            blocks.append(f"interleaved 1F1B, {lay['vpp']} model chunks a stage: each stage keeps the activations "
                          "of the chunks Megatron-LM's schedule has in flight (docs: Parallelism)")
        elif m["mode"] == "train" and lay["pp"] > 1:
            blocks.append(f"1F1B: stage s keeps the activations of min({lay['pp']} - s, "
                          f"{lay['micro_batches']}) micro-batches of {count(m['batch'])}")
        elif lay["micro_batches"] > 1:
            blocks.append(f"kv_cache: the {lay['micro_batches']} batches of {count(m['batch'])} in flight through the "
                          "pipeline (--budget's largest batch: each of them)")
    elif m["mode"] == "train":
        kinds = m["activation_layer_groups"]
        if len(kinds) == 1:
            blocks.append(f"activations per layer: {fmt(m['activations_per_layer'])} (x {cfg.n_layers} layers)")
        for label, n in kinds.items() if len(kinds) > 1 else ():
            blocks.append(f"activations per layer, {label}: {fmt(n)}")
        blocks.append(f"Korthikanti et al. sbh(34 + 5as/h): {fmt(m['korthikanti_per_layer'])} per layer "
                      "(fp16 with dropout masks; llmcalc's reference has no dropout)")
        if m["attention"]:
            blocks.append("attention: one layer's pre-softmax scores (eager; the softmax output and flash's "
                          "log-sum-exp are saved activations)")
    else:
        peak = (f"one layer's peak, {count(m['attention_queries'])} queries x {count(m['attention_keys'])} keys"
                if m["attention_queries"] else "none, no layer here attends")
        positions = ("the last position" if not m.get("all_logits") else "every position (--all-logits)"
                     if m["chunk"] is None else f"a chunk's {count(m['chunk'])} positions at a time (--all-logits)")
        blocks.append(f"attention: {peak}; logits: {positions} of each sequence")
    workload = pick(m, "model", "mode", "seq_len", "batch", "gpus")
    return Report(m, [{**workload, "part": k, "bytes": m[k]} for k in PARTS], blocks)


def memory(
    models: Models = None,
    mode: Annotated[Literal[tuple(MEMORY_MODES)], typer.Option(
        "--mode", help="train: a training step; inference: a prefill of --seq tokens with its KV cache.",
        rich_help_panel=WORKLOAD)] = "train",
    seq: Seqs = None,
    batch: MicroBatches = ONE,
    attention: Attention = "flash",
    recompute: Recompute = "none",
    all_logits: AllLogits = False,
    dtype: Dtype = None,
    weights_dtype: WeightsDtype = None,
    kv_dtype: KvDtype = None,
    state_dtype: StateDtype = None,
    grad_dtype: GradDtype = None,
    chunk: Chunk = None,
    images: Images = 0,
    image_size: ImageSize = None,
    optimizer: Optimizer = "adam",
    lora_rank: LoraRank = None,
    lora_alpha: LoraAlpha = None,
    lora_targets: LoraTargets = None,
    budget: Budget = None,
    hardware_spec: Annotated[Optional[str], hardware_option(
        "As --budget, with the memory of a bundled accelerator (llmcalc hardware) or a YAML spec.")] = None,
    tp: Tp = 1,
    cp: Cp = 1,
    pp: Pp = 1,
    vpp: Vpp = 1,
    dp: Dp = 1,
    ep: Ep = 1,
    zero: Zero = 0,
    sp: Sp = False,
    global_batch: GlobalBatch = None,
    gpus: Gpus = None,
    stage: Stage = None,
    exact: Exact = False,
    fmt: Format = "table",
    json_out: Json = False,
) -> None:
    """Memory by part: weights, gradients, optimizer state, activations and logits for
    training; weights, KV cache, attention working memory and logits for inference. One model
    and one workload: a breakdown; several: a row for each model x seq x batch.

    Examples:
      llmcalc memory mistral-7b --seq 4096
      llmcalc memory gpt2-xl --batch 8 --recompute full
      llmcalc memory mistral-7b --mode inference --chunk 4096
      llmcalc memory gpt2-xl --seq 1024,2048 --batch 1,8
      llmcalc memory --mode inference --seq 4096
      llmcalc memory llama-2-7b --seq 4096 --dp 8 --zero 3
      llmcalc memory llama-3.1-70b --tp 8 --pp 4 --sp
      llmcalc memory llama-3.1-70b --tp 8 --pp 4 --sp --stage 3
      llmcalc memory llama-3.1-405b --tp 8 --pp 16 --vpp 2
      llmcalc memory llama-3-8b --lora-rank 16 \\
        --weights-dtype nf4-dq --hardware rtx-4090
    """
    fmt = output_format(fmt, json_out)
    run_mode = MEMORY_MODES[mode]
    given = applicable((run_mode,), f"--mode {mode}", chunk=chunk, kv_dtype=kv_dtype, state_dtype=state_dtype,
                       recompute=recompute, all_logits=all_logits, optimizer=optimizer, grad_dtype=grad_dtype,
                       zero=zero, vpp=vpp, global_batch=global_batch)
    lora = lora_spec(lora_rank, lora_alpha, lora_targets)  # RunSpec refuses it outside training
    budget_bytes, hw_name = _budget(budget, hardware_spec)
    base, layouts = runs(run_mode, batch, attention=attention, dtype=dtype, weights_dtype=weights_dtype, lora=lora,
                         images=images, image_size=image_size, tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, sp=sp, gpus=gpus,
                         **given)
    warn_idle(layouts[batch[0]])
    results = []
    cfgs = splittable(lora_models(models, lora), base.replace(seq=seq and seq[0], layout=layouts[batch[0]]),
                      models is None)
    for cfg, s, b in workloads(cfgs, seq, batch, state_dtype=given["state_dtype"], run=base):
        run = base.replace(seq=s, batch=b, layout=layouts[b])
        record = memory_json(cfg, memory_report(cfg, run, stage=stage), mode)
        if budget_bytes is not None:
            f = fit(cfg, run, budget_bytes)
            record["budget"] = {"bytes": f.budget, "hardware": hw_name, "fits": f.fits, "free": f.budget - f.total,
                                "max_batch": f.max_batch}
        results.append((cfg, record))
    fmt_bytes = count if exact else iec
    per_gpu = _per_gpu(layouts[batch[0]], stage)  # the batch changes only the micro-batches per step
    if len(results) == 1 and models:
        emit(_explain(*results[0], fmt_bytes, per_gpu), fmt)
        return
    records = [m for _, m in results]
    shown = [p for p in PARTS if any(m[p] for m in records)]
    several = len(batch) > 1
    fits = [("yes" if m["budget"]["fits"] else "no", count(m["budget"]["max_batch"])) if "budget" in m else ()
            for m in records]
    rows = [(m["model"], count(m["seq_len"]), *([count(m["batch"])] if several else []),
             *(fmt_bytes(m[p]) for p in shown), fmt_bytes(m["total"]), *f) for m, f in zip(records, fits)]
    budget_cols = [Col("fits"), Col("max batch")] if budget_bytes is not None else []
    table = Table([text_col("model", key=True), Col("seq", key=True), *([Col("batch", key=True)] if several else []),
                   *map(Col, shown), Col("total"), *budget_cols], [rows],
                  f"{mode} memory" + ("" if several else f", batch {count(batch[0])}") + per_gpu
                  + (f"; budget {_budget_label(records[0]['budget'])}" if budget_bytes is not None else "")
                  + ("; fits and max batch: the peak GPU's" if budget_bytes is not None and stage is not None else ""))
    csv = [pick(m, "model", "mode", "seq_len", "batch", "gpus", "stage", "peak_stage", "dtype", "weights_dtype",
                "kv_dtype", "state_dtype",
                "grad_dtype", "attention_impl", "recompute", *PARTS, "total",
                *(("budget.bytes", "budget.fits", "budget.max_batch") if budget_bytes is not None else ()))
           for m in records]
    emit(Report(one_or_list(records, models), csv, [table]), fmt)
