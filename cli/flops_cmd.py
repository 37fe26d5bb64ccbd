"""`llmcalc flops`: forward, backward and total FLOPs per component."""

import dataclasses
from typing import Annotated

import typer

from ..analysis.cluster.flops import GpuFlops, gpu_flops
from ..analysis.count.flops import (
    FAMILIES,
    SCORES_VALUES,
    FlopBreakdown,
    FlopReport,
    approximations,
    count_flops,
    mla_absorbed,
)
from ..analysis.model.config import ModelConfig
from ..analysis.spec import Layout, RunSpec
from .common import (
    image_record,
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
from .format import count, group_label, share, si
from .options import (
    ONE,
    WORKLOAD,
    AllLogits,
    Attention,
    Batches,
    Cp,
    Dp,
    Ep,
    Exact,
    Format,
    Gpus,
    Images,
    ImageSize,
    Json,
    LoraAlpha,
    LoraRank,
    LoraTargets,
    Mode,
    Models,
    Pp,
    Recompute,
    Seqs,
    Tp,
    Zero,
    applicable,
    output_format,
)
from .report import Col, Report, Table, emit, group_json, pick, text_col
from .terminal import warn


def _breakdown_json(b: FlopBreakdown) -> dict:
    return {"matmul": b.matmul_total, "elementwise": b.elementwise_total, "total": b.total,
            "components": b.matmul, "elementwise_components": b.elementwise}


def flops_json(cfg: ModelConfig, r: FlopReport, other: FlopReport, gpu: GpuFlops | None = None) -> dict:
    """``other``: the same run in the other attention convention; ``gpu``: ``r`` is one GPU's under a layout,
    without the whole model's approximations."""
    causal = r if r.run.causal else other
    run = r.run
    out = {"model": cfg.name, "seq_len": run.seq, "batch": run.batch,
           "mode": run.mode, "attention": run.attention,
           "convention": "causal" if run.causal else "dense", "recompute": run.recompute,
           "forward": _breakdown_json(r.forward), "backward": _breakdown_json(r.backward),
           "total": _breakdown_json(r.total),
           "layer_groups": [group_json(g, forward_matmul=sum(mm.values()), forward_components=mm)
                            for g, mm in r.groups],
           "causal_total_matmul": causal.total.matmul_total}
    if gpu is None:
        approx = approximations(cfg, run)
        out["approximations"] = {"six_n_tokens": approx.six_n,
                                 "six_n_tokens_with_embeddings": approx.six_n_with_embeddings, "palm": approx.palm}
    else:
        out.update(gpus=run.layout.gpus, layout=dataclasses.asdict(run.layout), stage=gpu.stage,
                   stage_totals=list(gpu.stage_totals), cp_rank=gpu.rank)
    return {**out, **({"lora": lora_record(cfg, run.lora)} if run.lora else {}), **image_record(run)}


def _per_gpu(record: dict, several: bool = False) -> str:
    """The title's note of a layout ("" on one GPU): whose figures they are (``several``: each row its model's
    busiest GPU, the CSV's stage and cp_rank)."""
    if "gpus" not in record:
        return ""
    layout = Layout(**record["layout"])
    which = [f"pipeline stage {record['stage']}"] if layout.pp > 1 else []
    which += [f"context-parallel rank {record['cp_rank']}"] if layout.cp > 1 else []
    busiest = (", each model's busiest GPU" if several else f", the busiest ({', '.join(which)})") if which else ""
    return f"; per GPU of {count(layout.gpus)}: {layout.describe()}{busiest}"


def _fmt(n: int, exact: bool, macs: bool = False) -> str:
    if macs:
        n //= 2
    return count(n) if exact else si(n, "MAC" if macs else "FLOP")


def _breakdown(cfg: ModelConfig, r: FlopReport, other_report: FlopReport, record: dict, exact: bool,
               macs: bool) -> Report:
    """One model: ``r`` in the asked convention, ``other_report`` in the other one. CSV: a row
    per matmul component and per elementwise op."""
    w = r.run
    tot = r.total
    conv = "causal" if w.causal else "dense"
    images = f" ({count(w.text)} text + {w.images} image{'s' if w.images > 1 else ''} of {w.image_size} px)" \
        if w.images else ""
    kernel = f", {w.attention} backward" if w.mode == "train" else f" ({w.attention})"  # a pass without one
    title = (f"{cfg.name}: {w.mode}, batch {w.batch} x seq {count(w.seq)}{images}, {conv} attention{kernel}"
             + (", MLA absorbed" if mla_absorbed(cfg, w) else "")
             + recompute_tag(w.recompute) + lora_tag(record.get("lora")) + _per_gpu(record))
    other = "dense" if w.causal else "causal"
    unit = "MACs" if macs else "FLOPs"
    rows = []
    for key, n in tot.matmul.items():
        alt = _fmt(other_report.total.matmul[key], exact, macs) if key in SCORES_VALUES else ""
        rows.append((key, _fmt(r.forward.matmul.get(key, 0), exact, macs),
                     _fmt(r.backward.matmul.get(key, 0), exact, macs), _fmt(n, exact, macs),
                     share(n, tot.matmul_total), alt))
    blocks: list = [Table(
        [text_col("matmul " + unit, key=True), Col("forward"), Col("backward"), Col("total"), Col("share"),
         Col(f"total ({other})")], [rows], title,
        footer=["matmul", _fmt(r.forward.matmul_total, exact, macs), _fmt(r.backward.matmul_total, exact, macs),
                _fmt(tot.matmul_total, exact, macs), "100.0%", _fmt(other_report.total.matmul_total, exact, macs)])]
    ew = [(k, _fmt(r.forward.elementwise.get(k, 0), exact), _fmt(r.backward.elementwise.get(k, 0), exact),
           _fmt(v, exact), share(v, tot.total)) for k, v in tot.elementwise.items()]
    blocks.append(Table(
        [text_col("elementwise FLOPs", key=True), Col("forward"), Col("backward"), Col("total"), Col("of all FLOPs")],
        [ew], footer=["elementwise", _fmt(r.forward.elementwise_total, exact),
                      _fmt(r.backward.elementwise_total, exact), _fmt(tot.elementwise_total, exact),
                      share(tot.elementwise_total, tot.total)]))
    if len(r.groups) > 1:
        blocks.append(Table(
            [text_col("layer kind", key=True), Col("forward matmul per layer"), Col("forward matmul, all its layers")],
            [[(group_label(g), _fmt(sum(mm.values()), exact, macs), _fmt(sum(mm.values()) * g.count, exact, macs))
              for g, mm in r.groups]]))
    attn = r.forward.family_matmul("attn scores+values")
    blocks.append(f"forward:  {_fmt(r.forward.total, exact)} (matmul {_fmt(r.forward.matmul_total, exact)}, "
                  f"attention scores+values {share(attn, r.forward.matmul_total)} of it)")
    if w.mode == "train":
        blocks.append(f"backward: {_fmt(r.backward.total, exact)} (matmul {_fmt(r.backward.matmul_total, exact)})")
    blocks.append(f"total:    {_fmt(tot.total, exact)} (matmul {_fmt(tot.matmul_total, exact)}, "
                  f"elementwise {_fmt(tot.elementwise_total, exact)})")
    approx = record.get("approximations", {})  # the whole model's: not beside one GPU's figures
    rule = "6" if w.mode == "train" else "2"
    for label, value in () if not approx else (
            (f"{rule}*N*tokens (N = non-embedding{' active' if cfg.moe else ''})", approx["six_n_tokens"]),
            (f"{rule}*N*tokens with embeddings", approx["six_n_tokens_with_embeddings"]),
            ("PaLM (6N + 12LHQT) per token" if rule == "6" else "PaLM forward (2N + 4LHQT) per token",
             approx["palm"])):
        blocks.append(f"  {label}: {_fmt(value, exact)}  (exact matmul / this = {tot.matmul_total / value:.3f})")
    workload = pick(record, "model", "seq_len", "batch", "mode", "attention", "convention", "recompute", "gpus",
                    "stage", "cp_rank")
    csv = [{**workload, "kind": kind, "component": k, "forward": fwd.get(k, 0), "backward": bwd.get(k, 0),
            "total": n}
           for kind, fwd, bwd, total in (("matmul", r.forward.matmul, r.backward.matmul, tot.matmul),
                                         ("elementwise", r.forward.elementwise, r.backward.elementwise,
                                          tot.elementwise))
           for k, n in total.items()]
    return Report(record, csv, blocks)


def _side_by_side(runs: list, data: dict | list, records: list[dict], batches: list[int], mode: str, causal: bool,
                  exact: bool, macs: bool) -> Report:
    """A row per model x seq x batch: totals, and the shares of the matmul FLOPs."""
    rows = []
    for cfg, r, c in runs:
        shares = [share(r.total.family_matmul(g), r.total.matmul_total) for g in FAMILIES]
        if not causal:
            shares.append(share(c.total.family_matmul("attn scores+values"), c.total.matmul_total))
        batch = [count(r.run.batch)] if len(batches) > 1 else []
        rows.append((cfg.name, count(r.run.seq), *batch, _fmt(r.total.total, exact),
                     _fmt(r.total.matmul_total, exact, macs), *shares))
    conv = "causal" if causal else "dense"
    extra = [] if causal else ["scores+values if causal"]
    batch_cols = [Col("batch", key=True)] if len(batches) > 1 else []
    title = f"{mode} FLOPs, {f'batch {batches[0]}, ' if len(batches) == 1 else ''}{conv} attention" \
            f"{_per_gpu(records[0], several=True)}; " \
            "shares of the matmul FLOPs"
    table = Table([text_col("model", key=True), Col("seq", key=True), *batch_cols, Col("total"),
                   Col("matmul MACs" if macs else "matmul"),
                   *map(Col, FAMILIES), *map(Col, extra)], [rows], title)
    csv = [pick(rec, "model", "seq_len", "batch", "mode", "attention", "convention", "recompute", "gpus", "stage",
                "cp_rank", *(f"{part}.{kind}" for part in ("forward", "backward", "total")
                  for kind in ("matmul", "elementwise", "total")),
                "causal_total_matmul", "approximations.six_n_tokens", "approximations.six_n_tokens_with_embeddings",
                "approximations.palm") for rec in records]
    return Report(data, csv, [table])


def flops(
    models: Models = None,
    seq: Seqs = None,
    batch: Batches = ONE,
    mode: Mode = "train",
    attention: Attention = "flash",
    causal: Annotated[bool, typer.Option("--causal", help="Count only unmasked query-key pairs.",
                                         rich_help_panel=WORKLOAD)] = False,
    recompute: Recompute = "none",
    all_logits: AllLogits = False,
    lora_rank: LoraRank = None,
    lora_alpha: LoraAlpha = None,
    lora_targets: LoraTargets = None,
    images: Images = 0,
    image_size: ImageSize = None,
    tp: Tp = 1,
    cp: Cp = 1,
    pp: Pp = 1,
    dp: Dp = 1,
    ep: Ep = 1,
    zero: Zero = 0,
    gpus: Gpus = None,
    exact: Exact = False,
    macs: Annotated[bool, typer.Option("--macs", help="Show matmul multiply-accumulates (FLOPs / 2).")] = False,
    fmt: Format = "table",
    json_out: Json = False,
) -> None:
    """FLOPs per component: matmul and elementwise, forward, backward and total. One model and
    one workload: a breakdown; several: a row for each model x seq x batch. With a parallel layout
    (--tp, --pp, --cp, ...): one GPU's pass of its micro-batch, the busiest GPU's.

    Examples:
      llmcalc flops gpt2-xl --seq 16384
      llmcalc flops gpt2-xl --seq 16384 --causal --json
      llmcalc flops gpt2-small --seq 1024,4096,16384
      llmcalc flops mistral-7b --mode decode --batch 1,8,32
      llmcalc flops --mode decode --seq 4096
      llmcalc flops llama-2-7b --seq 2048 --lora-rank 16
      llmcalc flops gemma-3-27b-it --seq 100 --images 1
      llmcalc flops llama-3.1-70b --seq 8192 --tp 8 --pp 4
    """
    fmt = output_format(fmt, json_out)
    if macs and fmt in ("json", "csv"):
        warn(f"--macs shows the tables' matmul figures as multiply-accumulates; {fmt} keeps FLOPs (MACs are "
             "matmul FLOPs / 2)")
    given = applicable((mode,), f"--mode {mode}", recompute=recompute, all_logits=all_logits, zero=zero)
    lora = lora_spec(lora_rank, lora_alpha, lora_targets)  # RunSpec refuses it outside training
    base = RunSpec(mode, None, 1, attention, causal, given["recompute"], given["all_logits"], lora=lora, images=images,
                   image_size=image_size)
    layout = Layout.of(tp, pp, dp, ep, given["zero"], cp=cp, gpus=gpus, mode=mode)
    warn_idle(layout)
    runs, records = [], []
    cfgs = splittable(lora_models(models, lora), base.replace(seq=seq and seq[0], layout=layout), models is None)
    for cfg, s, b in workloads(cfgs, seq, batch, run=base):
        run = base.replace(seq=s, batch=b, layout=layout)
        if layout.trivial:
            gpu, r, other = None, count_flops(cfg, run), count_flops(cfg, run.replace(causal=not causal))
        else:  # the other convention on the same GPU
            gpu = gpu_flops(cfg, run)
            r, other = gpu.report, gpu_flops(cfg, run.replace(causal=not causal), gpu.stage, gpu.rank).report
        runs.append((cfg, r, other))
        records.append(flops_json(cfg, r, other, gpu))
    if len(runs) == 1 and models:
        emit(_breakdown(*runs[0], records[0], exact=exact, macs=macs), fmt)
        return
    emit(_side_by_side(runs, one_or_list(records, models), records, batch, mode, causal, exact, macs), fmt)
