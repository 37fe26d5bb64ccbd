"""`llmcalc kvcache`: KV-cache bytes, and how many sequences fit in a memory budget."""

import dataclasses
from typing import Annotated, Optional

from ..analysis.cluster.memory import cache_budget, gpu_kv_cache
from ..analysis.spec import runs
from .common import image_record, load_models, lora_spec, one_or_list, splittable, workloads
from .format import count, group_label, iec
from .options import (
    ONE,
    Batches,
    Budget,
    Counts,
    Cp,
    Dp,
    Dtype,
    Ep,
    Exact,
    Format,
    Gpus,
    Images,
    ImageSize,
    Json,
    KvDtype,
    LoraAlpha,
    LoraRank,
    LoraTargets,
    Models,
    Pp,
    StateDtype,
    Tp,
    WeightsDtype,
    Zero,
    applicable,
    output_format,
    seqs_option,
)
from .report import Col, Report, Table, emit, group_json, pick, text_col
from .terminal import warn


def kvcache(
    models: Models = None,
    seq: Annotated[Optional[Counts], seqs_option("Context tokens per sequence, or a comma list: a row for each. "
                                                 "Default: the model's context length.")] = None,
    batch: Batches = ONE,
    kv_dtype: KvDtype = None,
    state_dtype: StateDtype = None,
    budget: Budget = None,
    dtype: Dtype = None,
    weights_dtype: WeightsDtype = None,
    images: Images = 0,
    image_size: ImageSize = None,
    tp: Tp = 1,
    cp: Cp = 1,
    pp: Pp = 1,
    dp: Dp = 1,
    ep: Ep = 1,
    zero: Zero = 0,
    gpus: Gpus = None,
    lora_rank: LoraRank = None,
    lora_alpha: LoraAlpha = None,
    lora_targets: LoraTargets = None,
    exact: Exact = False,
    fmt: Format = "table",
    json_out: Json = False,
) -> None:
    """KV-cache size: bytes per token, cached tokens (a sliding window caps them), total; a row
    for each model x seq x batch. With --budget: the largest batch whose inference memory fits
    (as `llmcalc memory --mode inference --budget` finds it) and the cached tokens that fit beside
    the weights. With a parallel layout (--tp, --pp, ...): one GPU's cache, of the pipeline stage that holds
    the most, and its weights under --budget.

    Examples:
      llmcalc kvcache llama-2-7b --seq 4096 --kv-dtype fp16
      llmcalc kvcache mistral-7b --budget 80GiB
      llmcalc kvcache mistral-7b --seq 1024,4096,32768
      llmcalc kvcache llama-3-8b --batch 1,8,64 --format csv
      llmcalc kvcache gemma-3-27b-it --seq 1000 --images 4
      llmcalc kvcache llama-3.1-70b --tp 8 --budget 80GB
    """
    fmt = output_format(fmt, json_out)
    if weights_dtype is not None and budget is None:
        warn("--weights-dtype sizes the weights beside the cache under --budget; ignored without it")
    rows, out, groups, states = [], [], [], []
    fmt_bytes = count if exact else iec
    given = applicable(("decode",), "a decode's KV cache", zero=zero)  # the run spec's options, as a decode's
    base, layouts = runs("decode", batch, dtype=dtype, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                         state_dtype=state_dtype, images=images, image_size=image_size, tp=tp, cp=cp, pp=pp, dp=dp,
                         ep=ep, gpus=gpus, lora=lora_spec(lora_rank, lora_alpha, lora_targets), **given)
    layout = layouts[batch[0]]
    cfgs = splittable(load_models(models), base.replace(seq=seq and seq[0], layout=layout), models is None)
    for cfg, s, b in workloads(cfgs, seq, batch, state_dtype=state_dtype, run=base):
        run = base.replace(seq=s, batch=b, layout=layout).resolve(cfg)
        gpu = gpu_kv_cache(cfg, run)
        c = gpu.cache
        s = run.seq  # with images, their tokens too
        item = {"model": cfg.name, "seq_len": s, "batch": b, "kv_dtype": run.kv_dtype, **image_record(run),
                "cached_tokens": c.cached_tokens, "bytes_per_token": c.bytes_per_token,
                "bytes": c.bytes, "bytes_per_layer": c.bytes_per_layer,
                "kv_bytes": c.kv_bytes, "state_bytes": c.state_bytes, "state_dtype": run.state_dtype,
                "layer_groups": [group_json(g.group, cached_tokens=g.cached_tokens,
                                            bytes_per_token=g.bytes_per_token, bytes=g.bytes)
                                 for g in c.groups]}
        if not layout.trivial:
            item.update(gpus=layout.gpus, layout=dataclasses.asdict(layout), stage=gpu.stage,
                        stage_totals=list(gpu.stage_totals))
        key = [cfg.name, count(s)] + ([count(b)] if len(batch) > 1 else [])
        if len(c.groups) > 1:
            groups += [(f"{cfg.name} {group_label(g.group)}", *key[1:], count(g.cached_tokens),
                        fmt_bytes(g.bytes_per_token), fmt_bytes(g.bytes), fmt_bytes(g.bytes * g.group.count))
                       for g in c.groups]
        row = [*key, count(c.cached_tokens), fmt_bytes(c.bytes_per_token), fmt_bytes(c.bytes_per_layer),
               fmt_bytes(c.bytes)]
        states.append([fmt_bytes(c.kv_bytes), fmt_bytes(c.state_bytes)])  # a recurrent layer's state apart
        if budget is not None:
            served = cache_budget(cfg, run, budget)
            item.update(budget=budget, weights_dtype=run.weights_dtype, weights_bytes=served.weights,
                        max_batch=served.max_batch, max_tokens=served.max_tokens)
            if layout.pp > 1:  # the weights and tokens are those of the stage that fits the fewest
                item["budget_stage"] = served.stage
            row += [fmt_bytes(served.weights) + f" ({run.weights_dtype})",
                    count(served.max_batch) if served.weights_fit else "weights do not fit",
                    count(served.max_tokens) if served.weights_fit and served.max_tokens is not None else "-"]
        out.append(item)
        rows.append(row)
    several = len(batch) > 1
    key_cols = [Col("seq", key=True)] + ([Col("batch", key=True)] if several else [])
    cols = [text_col("model", key=True), *key_cols, Col("cached tokens"), Col("bytes/token"), Col("per layer"),
            Col("total" if several else f"total (batch {batch[0]})")]
    if any(o["state_bytes"] for o in out):  # recurrent layers: the KV and the state (constant in seq) apart
        cols[-1:-1] = [Col("KV"), Col("state")]
        rows = [r[:len(cols) - 3] + s + r[len(cols) - 3:] for r, s in zip(rows, states)]
    if budget is not None:
        cols += [Col("weights"), Col("max batch"), Col("max tokens")]
    title = f"KV cache of every layer ({', '.join(sorted({o['kv_dtype'] for o in out}))})"
    if not layout.trivial:
        title = (f"KV cache ({', '.join(sorted({o['kv_dtype'] for o in out}))}) per GPU of {count(layout.gpus)}: "
                 f"{layout.describe()}" + (", the pipeline stage holding the most" if layout.pp > 1 else ""))
    if budget is not None:
        title += f"; budget {iec(budget)} = {count(budget)} bytes"
    blocks: list = [Table(cols, [rows], title)]
    if budget is not None and layout.pp > 1:
        blocks.append("weights and max tokens: a GPU's of the pipeline stage that fits the fewest tokens "
                      "(the JSON's budget_stage); the cache columns: the stage holding the most")
    if groups:
        blocks.append(Table([text_col("layers", key=True), *key_cols, Col("cached tokens"),
                             Col("bytes/token per layer"), Col("per layer"), Col("all its layers")],
                            [groups], "per layer kind"))
    csv = [pick(o, "model", "seq_len", "batch", "gpus", "stage", "kv_dtype", "cached_tokens", "bytes_per_token",
                "bytes_per_layer", "bytes", "budget", "budget_stage", "weights_dtype", "weights_bytes", "max_batch",
                "max_tokens") for o in out]
    emit(Report(one_or_list(out, models), csv, blocks), fmt)
