"""`llmcalc kvcache`: KV-cache bytes, and what fits in a memory budget."""

from __future__ import annotations

from typing import Optional

import typer

from .common import (
    BatchOpt,
    DtypeOpt,
    ExactOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelsArg,
    WeightsDtypeOpt,
    checked_dtypes,
    load_models,
    one_or_list,
    parse_seqs,
    parse_size,
    positive,
    warn_past_context,
)
from .render import count, group_json, group_label, iec, print_json, show


def kvcache(
    models: Optional[list[str]] = ModelsArg,
    seq: Optional[str] = typer.Option(None, "--seq", help="Context tokens per sequence, or a comma "
                                      "list. Default: the model's context length."),
    batch: int = BatchOpt,
    kv_dtype: Optional[str] = KvDtypeOpt,
    budget: Optional[str] = typer.Option(None, "--budget", help="Device memory: 80GiB, 80GB (10^9), "
                                         "24G (= GiB), 512MiB. Reports how many sequences fit."),
    dtype: Optional[str] = DtypeOpt,
    weights_dtype: Optional[str] = WeightsDtypeOpt,
    exact: bool = ExactOpt,
    json_out: bool = JsonOpt,
) -> None:
    """KV-cache size: bytes per token, cached tokens (a sliding window caps them), total.

    Examples:
      llmcalc kvcache llama-2-7b --seq 4096 --kv-dtype fp16
      llmcalc kvcache mistral-7b --seq 8192 --kv-dtype fp16 --budget 80GiB
      llmcalc kvcache mistral-7b --seq 1024,4096,16384,32768     # the window plateau
    """
    from ..analysis.kvcache import fit_budget, kv_cache  # here: faster start for other commands
    from ..analysis.run import RunSpec

    seqs = parse_seqs(seq)
    positive(batch, "--batch")
    checked_dtypes(dtype, weights_dtype, kv_dtype)
    budget_bytes = parse_size(budget) if budget is not None else None
    rows, out, groups = [], [], []
    fmt = count if exact else iec
    for cfg in load_models(models):
        for s in seqs:
            s = s or cfg.context_length
            warn_past_context(cfg, s)
            run = RunSpec("decode", s, batch, dtype=dtype, weights_dtype=weights_dtype,
                          kv_dtype=kv_dtype).resolve(cfg)
            kv_dt, w_dt = run.kv_dtype, run.weights_dtype
            c = kv_cache(cfg, run)
            item = {"model": cfg.name, "seq_len": s, "batch": batch, "kv_dtype": kv_dt,
                    "cached_tokens": c.cached_tokens, "bytes_per_token": c.bytes_per_token,
                    "bytes": c.bytes, "bytes_per_layer": c.bytes_per_layer,
                    "layer_groups": [group_json(g.group, cached_tokens=g.cached_tokens,
                                                bytes_per_token=g.bytes_per_token, bytes=g.bytes)
                                     for g in c.groups]}
            if len(c.groups) > 1:
                groups += [(f"{cfg.name} {group_label(g.group)}", count(s), count(g.cached_tokens),
                            fmt(g.bytes_per_token), fmt(g.bytes), fmt(g.bytes * g.group.count)) for g in c.groups]
            row = [cfg.name, count(s), count(c.cached_tokens), fmt(c.bytes_per_token),
                   fmt(c.bytes_per_layer), fmt(c.bytes)]
            if budget_bytes is not None:
                fit = fit_budget(cfg, c, budget_bytes, w_dt)
                item.update(budget=budget_bytes, weights_dtype=w_dt, weights_bytes=fit.weights,
                            max_batch=fit.max_batch, max_tokens=fit.max_tokens)
                row += [fmt(fit.weights) + f" ({w_dt})",
                        count(fit.max_batch) if fit.free > 0 else "weights do not fit",
                        count(fit.max_tokens) if fit.free > 0 else "-"]
            out.append(item)
            rows.append(row)
    if json_out:
        print_json(one_or_list(out, models))
        return
    cols = ["model", "seq", "cached tokens", "bytes/token", "per layer", f"total (batch {batch})"]
    if budget_bytes is not None:
        cols += ["weights", "max batch", "max tokens"]
    title = f"KV cache of every layer ({', '.join(sorted({o['kv_dtype'] for o in out}))})"
    if budget_bytes is not None:
        title += f"; budget {budget} = {iec(budget_bytes)} = {count(budget_bytes)} bytes"
    show(title, cols, rows)
    if groups:
        show("per layer kind", ["layers", "seq", "cached tokens", "bytes/token per layer", "per layer",
                                "all its layers"], groups)
