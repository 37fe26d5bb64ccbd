"""`llmcalc memory`: training and inference memory, part by part."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from ..analysis.run import RunSpec
from .common import (
    BatchOpt,
    DtypeOpt,
    ExactOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelsArg,
    WeightsDtypeOpt,
    checked_dtypes,
    choice,
    load_models,
    one_or_list,
    parse_seqs,
    positive,
    warn_past_context,
)
from .errors import UsageError
from .render import console, count, iec, print_json, share, show, warn

if TYPE_CHECKING:
    from ..analysis.config import ModelConfig
    from ..analysis.memory import MemoryReport

MEMORY_MODES = ("train", "inference")  # inference: a prefill of --seq tokens (RunSpec mode "prefill")


def memory_json(cfg: ModelConfig, m: MemoryReport, mode: str) -> dict:
    run = m.run
    out = {"model": cfg.name, "mode": mode, "seq_len": run.seq, "batch": run.batch, "dtype": run.dtype,
           "weights_dtype": run.weights_dtype, "kv_dtype": run.kv_dtype, "attention_impl": run.attention,
           "recompute": run.recompute, **m.parts, "total": m.total}
    if mode == "train":
        out.update(activations_per_layer=max(m.activations_per_layer.values()),
                   activation_components=m.activation_components,
                   activation_layer_groups=m.activations_per_layer,
                   korthikanti_per_layer=m.korthikanti_per_layer)
    else:
        out.update(attention_queries=m.attention_queries, attention_keys=m.attention_keys)
    return out


def _explain(cfg: ModelConfig, m: dict, fmt) -> None:
    from ..analysis.memory import PARTS

    rows = [(k, fmt(m[k]), share(m[k], m["total"])) for k in PARTS if m[k]]
    title = (f"{cfg.name}: {m['mode']} memory, batch {m['batch']} x seq {m['seq_len']:,}, "
             f"{m['dtype']}, {m['attention_impl']} attention" + (", recompute" if m["recompute"] else ""))
    show(title, ["part", "bytes", "share"], rows, footer=["total", fmt(m["total"]), "100.0%"])
    if m["mode"] == "train":
        kinds = m["activation_layer_groups"]
        if len(kinds) == 1:
            console.print(f"activations per layer: {fmt(m['activations_per_layer'])} (x {cfg.n_layers} layers)")
        for label, n in kinds.items() if len(kinds) > 1 else ():
            console.print(f"activations per layer, {label}: {fmt(n)}")
        console.print(f"Korthikanti et al. sbh(34 + 5as/h): {fmt(m['korthikanti_per_layer'])} per layer "
                      "(fp16 with dropout masks; llmcalc's reference has no dropout)")
        console.print("attention: one layer's pre-softmax scores (eager; the softmax output and flash's "
                      "log-sum-exp are saved activations)")
    else:
        console.print(f"attention: one layer's peak, {m['attention_queries']:,} queries x "
                      f"{m['attention_keys']:,} keys; logits: the last position of each sequence")


def memory(
    models: Optional[list[str]] = ModelsArg,
    mode: str = typer.Option("train", "--mode", help="train | inference."),
    seq: Optional[str] = typer.Option(None, "--seq", help="Tokens per sequence. Default: the "
                                      "model's context length."),
    batch: int = BatchOpt,
    attention: str = typer.Option("flash", "--attention", help="eager | flash."),
    recompute: bool = typer.Option(False, "--recompute", help="train: full activation "
                                   "recomputation (keep only each block's input)."),
    dtype: Optional[str] = DtypeOpt,
    weights_dtype: Optional[str] = WeightsDtypeOpt,
    kv_dtype: Optional[str] = KvDtypeOpt,
    chunk: Optional[int] = typer.Option(None, "--chunk", help="inference: chunked prefill, C tokens "
                                        "per chunk."),
    optimizer: str = typer.Option("adam", "--optimizer", help="adam | adamw | sgd | sgd-momentum."),
    exact: bool = ExactOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Memory by part: weights, gradients, optimizer state, activations and logits for
    training; weights, KV cache, attention working memory and logits for inference.

    Examples:
      llmcalc memory mistral-7b --mode train --seq 4096
      llmcalc memory gpt2-xl --mode train --seq 1024 --batch 8 --attention eager --recompute
      llmcalc memory mistral-7b --mode inference --seq 16384 --chunk 4096 --batch 4
      llmcalc memory --mode inference --seq 4096      # every bundled model side by side
    """
    from ..analysis.run import ATTENTION_IMPLS, OPTIMIZER_STATES

    choice(mode, MEMORY_MODES, "--mode")
    choice(attention, ATTENTION_IMPLS, "--attention")
    choice(optimizer, tuple(OPTIMIZER_STATES), "--optimizer")
    if seq is not None and "," in seq:
        raise UsageError("--seq takes one value for memory")
    (seq_value,) = parse_seqs(seq)
    positive(batch, "--batch")
    if chunk is not None:
        positive(chunk, "--chunk")
    ignored = {"train": {"--chunk": chunk, "--kv-dtype": kv_dtype, "--weights-dtype": weights_dtype},
               "inference": {"--recompute": recompute or None,
                             "--optimizer": None if optimizer == "adam" else optimizer}}[mode]
    for option, value in ignored.items():
        if value is not None:
            warn(f"{option} does not apply to --mode {mode}; ignored")
    from ..analysis.memory import PARTS
    from ..analysis.memory import memory as memory_report

    checked_dtypes(dtype, weights_dtype, kv_dtype)
    train = mode == "train"
    results = []
    for cfg in load_models(models):
        s = seq_value or cfg.context_length
        warn_past_context(cfg, s)
        run = RunSpec("train" if train else "prefill", s, batch, attention, recompute=recompute and train,
                      dtype=dtype, weights_dtype=None if train else weights_dtype,
                      kv_dtype=None if train else kv_dtype, chunk=None if train else chunk,
                      optimizer=optimizer if train else "adam")
        results.append((cfg, memory_json(cfg, memory_report(cfg, run), mode)))
    if json_out:
        print_json(one_or_list([m for _, m in results], models))
        return
    fmt = count if exact else iec
    if len(results) == 1 and models:
        _explain(*results[0], fmt)
        return
    shown = [p for p in PARTS if any(m[p] for _, m in results)]
    rows = [(cfg.name, count(m["seq_len"]), *(fmt(m[p]) for p in shown), fmt(m["total"]))
            for cfg, m in results]
    show(f"{mode} memory, batch {batch}", ["model", "seq", *shown, "total"], rows)
