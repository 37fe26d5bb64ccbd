"""`llmcalc flops`: forward, backward and total FLOPs per component."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from .common import (
    BatchOpt,
    ExactOpt,
    JsonOpt,
    ModelsArg,
    choice,
    load_models,
    one_or_list,
    parse_seqs,
    positive,
    warn_past_context,
)
from .render import console, count, group_json, group_label, print_json, share, show, si

if TYPE_CHECKING:  # analysis.flops is imported where used: other commands start faster
    from ..analysis.config import ModelConfig
    from ..analysis.flops import FlopBreakdown, FlopReport

SCORES_VALUES = ("attention/scores", "attention/values")


def _column(key: str) -> str:
    """The share column of a breakdown key, by its family prefix alone (any attention kind's
    projections are ``attention/*``; any FFN kind's matrices ``mlp/*`` or ``moe/*``)."""
    if key in SCORES_VALUES:
        return "attn scores+values"
    return {"attention": "attn proj", "mlp": "mlp", "moe": "mlp"}.get(key.split("/")[0], key.replace("_", " "))


GROUPS = ("attn proj", "attn scores+values", "mlp", "lm head")  # share columns of the side-by-side table


def _group(mm: dict[str, int], column: str) -> int:
    return sum(v for k, v in mm.items() if _column(k) == column)


def _breakdown_json(b: FlopBreakdown) -> dict:
    return {"matmul": b.matmul_total, "elementwise": b.elementwise_total, "total": b.total,
            "components": b.matmul, "elementwise_components": b.elementwise}


def flops_json(cfg: ModelConfig, r: FlopReport, other: FlopReport) -> dict:
    """``other``: the same run in the other attention convention."""
    causal = r if r.run.causal else other
    from ..analysis.flops import approximations

    run = r.run
    approx = approximations(cfg, run)
    return {"model": cfg.name, "seq_len": run.seq, "batch": run.batch,
            "mode": run.mode, "attention": run.attention,
            "convention": "causal" if run.causal else "dense", "recompute": run.recompute,
            "forward": _breakdown_json(r.forward), "backward": _breakdown_json(r.backward),
            "total": _breakdown_json(r.total),
            "layer_groups": [group_json(g, forward_matmul=sum(mm.values()), forward_components=mm)
                             for g, mm in r.groups],
            "causal_total_matmul": causal.total.matmul_total,
            "approximations": {"six_n_tokens": approx.six_n,
                               "six_n_tokens_with_embeddings": approx.six_n_with_embeddings,
                               "palm": approx.palm}}


def _fmt(n: int, exact: bool, macs: bool = False) -> str:
    if macs:
        n //= 2
    return count(n) if exact else si(n, "MAC" if macs else "FLOP")


def _breakdown(cfg: ModelConfig, r: FlopReport, other_report: FlopReport, exact: bool, macs: bool) -> None:
    """One model: ``r`` in the asked convention, ``other_report`` in the other one."""
    from ..analysis.flops import approximations

    w = r.run
    tot = r.total
    conv = "causal" if w.causal else "dense"
    title = (f"{cfg.name}: {w.mode}, batch {w.batch} x seq {w.seq:,}, {conv} attention, "
             f"{w.attention} backward" + (", recompute" if w.recompute else ""))
    other = "dense" if w.causal else "causal"
    unit = "MACs" if macs else "FLOPs"
    rows = []
    for key, n in tot.matmul.items():
        alt = _fmt(other_report.total.matmul[key], exact, macs) \
            if key in SCORES_VALUES else ""
        rows.append((key, _fmt(r.forward.matmul.get(key, 0), exact, macs),
                     _fmt(r.backward.matmul.get(key, 0), exact, macs), _fmt(n, exact, macs),
                     share(n, tot.matmul_total), alt))
    show(title, ["matmul " + unit, "forward", "backward", "total", "share",
                                f"total ({other})"], rows,
                        footer=["matmul", _fmt(r.forward.matmul_total, exact, macs),
                                _fmt(r.backward.matmul_total, exact, macs),
                                _fmt(tot.matmul_total, exact, macs), "100.0%",
                                _fmt(other_report.total.matmul_total, exact, macs)])
    ew = [(k, _fmt(r.forward.elementwise.get(k, 0), exact), _fmt(r.backward.elementwise.get(k, 0), exact),
           _fmt(v, exact), share(v, tot.total)) for k, v in tot.elementwise.items()]
    show(None, ["elementwise FLOPs", "forward", "backward", "total", "of all FLOPs"],
                        ew, footer=["elementwise", _fmt(r.forward.elementwise_total, exact),
                                    _fmt(r.backward.elementwise_total, exact),
                                    _fmt(tot.elementwise_total, exact),
                                    share(tot.elementwise_total, tot.total)])
    if len(r.groups) > 1:
        show(None, ["layer kind", "forward matmul per layer", "forward matmul, all its layers"],
             [(group_label(g), _fmt(sum(mm.values()), exact, macs), _fmt(sum(mm.values()) * g.count, exact, macs))
              for g, mm in r.groups])
    attn = _group(r.forward.matmul, "attn scores+values")
    console.print(f"forward:  {_fmt(r.forward.total, exact)} "
                  f"(matmul {_fmt(r.forward.matmul_total, exact)}, attention scores+values "
                  f"{share(attn, r.forward.matmul_total)} of it)")
    if w.mode == "train":
        console.print(f"backward: {_fmt(r.backward.total, exact)} "
                      f"(matmul {_fmt(r.backward.matmul_total, exact)})")
    console.print(f"total:    {_fmt(tot.total, exact)} (matmul {_fmt(tot.matmul_total, exact)}, "
                  f"elementwise {_fmt(tot.elementwise_total, exact)})")
    approx = approximations(cfg, w)
    rule = "6" if w.mode == "train" else "2"
    for label, value in ((f"{rule}*N*tokens (N = non-embedding{' active' if cfg.moe else ''})", approx.six_n),
                         (f"{rule}*N*tokens with embeddings", approx.six_n_with_embeddings),
                         ("PaLM (6N + 12LHQT) per token" if rule == "6" else
                          "PaLM forward (2N + 4LHQT) per token", approx.palm)):
        console.print(f"  {label}: {_fmt(value, exact)}  (exact matmul / this = "
                      f"{tot.matmul_total / value:.3f})")


def flops(
    models: Optional[list[str]] = ModelsArg,
    seq: Optional[str] = typer.Option(None, "--seq", help="Tokens per sequence, or a comma list "
                                      "(1024,4096,16384). Default: the model's context length."),
    batch: int = BatchOpt,
    mode: str = typer.Option("train", "--mode", help="train | prefill | decode."),
    attention: str = typer.Option("flash", "--attention",
                                  help="eager | flash: backward 2x or 2.5x attention forward."),
    causal: bool = typer.Option(False, "--causal", help="Count only unmasked query-key pairs."),
    recompute: bool = typer.Option(False, "--recompute", help="Full activation recomputation."),
    all_logits: bool = typer.Option(False, "--all-logits", help="prefill: logits at every position."),
    exact: bool = ExactOpt,
    macs: bool = typer.Option(False, "--macs", help="Show matmul multiply-accumulates (FLOPs / 2)."),
    json_out: bool = JsonOpt,
) -> None:
    """FLOPs per component: matmul and elementwise, forward, backward and total.

    Examples:
      llmcalc flops gpt2-xl --seq 16384
      llmcalc flops gpt2-xl --seq 16384 --causal --json
      llmcalc flops gpt2-small --seq 1024,4096,16384
      llmcalc flops mistral-7b --mode decode --seq 8192 --batch 32
      llmcalc flops                    # every bundled model side by side
    """
    from ..analysis.flops import count_flops
    from ..analysis.run import ATTENTION_IMPLS, MODES, RunSpec

    seqs = parse_seqs(seq)
    positive(batch, "--batch")
    choice(mode, MODES, "--mode")
    choice(attention, ATTENTION_IMPLS, "--attention")
    cfgs = load_models(models)
    runs = []
    for cfg in cfgs:
        for s in seqs:
            s = s or cfg.context_length
            warn_past_context(cfg, s)
            run = RunSpec(mode, s, batch, attention, causal, recompute, all_logits)
            runs.append((cfg, count_flops(cfg, run), count_flops(cfg, run.replace(causal=not causal))))
    if json_out:
        print_json(one_or_list([flops_json(*run) for run in runs], models))
        return
    if len(runs) == 1 and models:
        _breakdown(*runs[0], exact=exact, macs=macs)
        return
    rows = []
    for cfg, r, c in runs:
        mm = r.total.matmul
        shares = [share(_group(mm, g), r.total.matmul_total) for g in GROUPS]
        if not causal:
            shares.append(share(_group(c.total.matmul, "attn scores+values"),
                                c.total.matmul_total))
        rows.append((cfg.name, count(r.run.seq), _fmt(r.total.total, exact),
                     _fmt(r.total.matmul_total, exact), *shares))
    conv = "causal" if causal else "dense"
    extra = [] if causal else ["scores+values if causal"]
    show(f"{mode} FLOPs, batch {batch}, {conv} attention; shares of the matmul FLOPs",
                        ["model", "seq", "total", "matmul", *GROUPS, *extra], rows)
