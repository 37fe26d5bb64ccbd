"""`llmcalc kvcache`: KV-cache bytes, and what fits in a memory budget."""

from __future__ import annotations

from typing import Optional

from .common import (
    BatchOpt,
    DtypeOpt,
    ExactOpt,
    FormatOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelsArg,
    WeightsDtypeOpt,
    checked_dtypes,
    load_models,
    one_or_list,
    output_format,
    parse_ints,
    parse_seqs,
    parse_size,
    workloads,
)
from .options import Option
from .render import Col, Report, Table, count, emit, group_json, group_label, iec, pick, text_col


def kvcache(
    models: Optional[list[str]] = ModelsArg,
    seq: Optional[str] = Option(None, "--seq", help="Context tokens per sequence, or a comma "
                                "list: a row for each. Default: the model's context length."),
    batch: str = BatchOpt,
    kv_dtype: Optional[str] = KvDtypeOpt,
    budget: Optional[str] = Option(None, "--budget", help="Device memory, with its unit: 80GiB, "
                                   "80GB (10^9), 24G (= GiB), 512MiB. Reports how many sequences fit."),
    dtype: Optional[str] = DtypeOpt,
    weights_dtype: Optional[str] = WeightsDtypeOpt,
    exact: bool = ExactOpt,
    fmt: str = FormatOpt,
    json_out: bool = JsonOpt,
) -> None:
    """KV-cache size: bytes per token, cached tokens (a sliding window caps them), total; a row
    for each model x seq x batch.

    Examples:
      llmcalc kvcache llama-2-7b --seq 4096 --kv-dtype fp16
      llmcalc kvcache mistral-7b --budget 80GiB
      llmcalc kvcache mistral-7b --seq 1024,4096,32768
      llmcalc kvcache llama-3-8b --batch 1,8,64 --format csv
    """
    from ..analysis.kvcache import fit_budget, kv_cache  # here: faster start for other commands
    from ..analysis.run import RunSpec

    fmt = output_format(fmt, json_out)
    seqs = parse_seqs(seq)
    batches = parse_ints(batch, "--batch")
    checked_dtypes(dtype, weights_dtype, kv_dtype)
    budget_bytes = parse_size(budget) if budget is not None else None
    rows, out, groups = [], [], []
    fmt_bytes = count if exact else iec
    for cfg, s, b in workloads(load_models(models), seqs, batches):
        run = RunSpec("decode", s, b, dtype=dtype, weights_dtype=weights_dtype,
                      kv_dtype=kv_dtype).resolve(cfg)
        kv_dt, w_dt = run.kv_dtype, run.weights_dtype
        c = kv_cache(cfg, run)
        item = {"model": cfg.name, "seq_len": s, "batch": b, "kv_dtype": kv_dt,
                "cached_tokens": c.cached_tokens, "bytes_per_token": c.bytes_per_token,
                "bytes": c.bytes, "bytes_per_layer": c.bytes_per_layer,
                "layer_groups": [group_json(g.group, cached_tokens=g.cached_tokens,
                                            bytes_per_token=g.bytes_per_token, bytes=g.bytes)
                                 for g in c.groups]}
        key = [cfg.name, count(s)] + ([count(b)] if len(batches) > 1 else [])
        if len(c.groups) > 1:
            groups += [(f"{cfg.name} {group_label(g.group)}", *key[1:], count(g.cached_tokens),
                        fmt_bytes(g.bytes_per_token), fmt_bytes(g.bytes), fmt_bytes(g.bytes * g.group.count))
                       for g in c.groups]
        row = [*key, count(c.cached_tokens), fmt_bytes(c.bytes_per_token), fmt_bytes(c.bytes_per_layer),
               fmt_bytes(c.bytes)]
        if budget_bytes is not None:
            fit = fit_budget(cfg, c, budget_bytes, w_dt, run.dtype)
            item.update(budget=budget_bytes, weights_dtype=w_dt, weights_bytes=fit.weights,
                        max_batch=fit.max_batch, max_tokens=fit.max_tokens)
            row += [fmt_bytes(fit.weights) + f" ({w_dt})",
                    count(fit.max_batch) if fit.free > 0 else "weights do not fit",
                    count(fit.max_tokens) if fit.free > 0 else "-"]
        out.append(item)
        rows.append(row)
    several = len(batches) > 1
    key_cols = [Col("seq", key=True)] + ([Col("batch", key=True)] if several else [])
    cols = [text_col("model", key=True), *key_cols, Col("cached tokens"), Col("bytes/token"), Col("per layer"),
            Col("total" if several else f"total (batch {batches[0]})")]
    if budget_bytes is not None:
        cols += [Col("weights"), Col("max batch"), Col("max tokens")]
    title = f"KV cache of every layer ({', '.join(sorted({o['kv_dtype'] for o in out}))})"
    if budget_bytes is not None:
        title += f"; budget {budget} = {iec(budget_bytes)} = {count(budget_bytes)} bytes"
    blocks: list = [Table(cols, [rows], title)]
    if groups:
        blocks.append(Table([text_col("layers", key=True), *key_cols, Col("cached tokens"),
                             Col("bytes/token per layer"), Col("per layer"), Col("all its layers")],
                            [groups], "per layer kind"))
    csv = [pick(o, "model", "seq_len", "batch", "kv_dtype", "cached_tokens", "bytes_per_token", "bytes_per_layer",
                "bytes", "budget", "weights_dtype", "weights_bytes", "max_batch", "max_tokens") for o in out]
    emit(Report(one_or_list(out, models), csv, blocks), fmt)
