"""`llmcalc models` and `llmcalc params`."""

from __future__ import annotations

from typing import Optional

from ..analysis.config import DTYPE_BITS, ModelConfig
from ..analysis.params import ParamCount, count_params, weight_bytes
from .common import JsonOpt, ModelsArg, family, load_models, one_or_list
from .render import console, count, group_json, group_label, iec, print_json, share, show


def _heads(cfg: ModelConfig) -> str:
    return f"{cfg.n_heads}/{cfg.kv_heads}"


def models(json_out: bool = JsonOpt) -> None:
    """List the bundled models.

    Example: llmcalc models
    """
    cfgs = load_models(None)  # by family, then size
    if json_out:
        print_json([{"model": c.name, "family": family(c), "params": count_params(c).total, "n_layers": c.n_layers,
                     "d_model": c.d_model, "n_heads": c.n_heads, "n_kv_heads": c.kv_heads,
                     "context_length": c.context_length, "description": c.description}
                    for c in cfgs])
        return
    sections: dict[str, list] = {}
    for c in cfgs:
        sections.setdefault(family(c), []).append(
            (c.name, count(count_params(c).total), c.n_layers, c.d_model, _heads(c), count(c.context_length),
             c.description))
    show(None, ["model", "parameters", "layers", "d_model", "heads/kv", "context", "description"],
         text_columns=(0, 6), sections=sections.values())


def params_json(cfg: ModelConfig, p: ParamCount) -> dict:
    return {"model": cfg.name, "total": p.total, "active": p.active, "components": p.components,
            "layer_groups": [group_json(g, params=sum(per.values()), components=per) for g, per in p.groups],
            "n_layers": cfg.n_layers, "embedding": p.embedding,
            "non_embedding": p.non_embedding,
            "weight_bytes": {dt: weight_bytes(p.total, dt) for dt in DTYPE_BITS}}


def _breakdown(cfg: ModelConfig, p: ParamCount) -> None:
    """One row per component; with several layer kinds, one row group per kind (its
    components per layer and over its layers) before the rest of the model."""
    L = cfg.n_layers
    if len(p.groups) == 1:
        per_layer = p.groups[0][1]
        rows = [(key, count(per_layer[key]) if key in per_layer else "", count(n), share(n, p.total))
                for key, n in p.components.items()]
        show(f"{cfg.name}: parameters ({L} layers)", ["component", "per layer", "total", "share"], rows,
             footer=["total", count(sum(per_layer.values())), count(p.total), "100.0%"])
    else:
        layer_keys = {k for _, per in p.groups for k in per}
        sections = [[(f"[bold]{group_label(g)}[/bold]", count(sum(per.values())),
                      count(sum(per.values()) * g.count), share(sum(per.values()) * g.count, p.total))]
                    + [("  " + k, count(n), count(n * g.count), share(n * g.count, p.total)) for k, n in per.items()]
                    for g, per in p.groups]
        sections.append([(k, "", count(n), share(n, p.total)) for k, n in p.components.items()
                         if k not in layer_keys])
        show(f"{cfg.name}: parameters ({L} layers, {len(p.groups)} layer kinds)",
             ["component", "per layer", "total", "share"], sections=sections,
             footer=["total", "", count(p.total), "100.0%"])
    if p.active != p.total:
        console.print(f"active per token: {count(p.active)} ({share(p.active, p.total)} of total)")
    console.print(f"embedding: {count(p.embedding)}   non-embedding: {count(p.non_embedding)}")
    sizes = "   ".join(f"{dt} {iec(weight_bytes(p.total, dt))}" for dt in ("fp32", "bf16", "fp8", "int4"))
    console.print(f"weights: {sizes}")
    if cfg.tie_embeddings:
        console.print("LM head tied to the token embedding: counted once, under embedding/token.")


def params(models: Optional[list[str]] = ModelsArg, json_out: bool = JsonOpt) -> None:
    """Exact parameter counts: a per-component breakdown for one model, a row per model
    for several.

    Examples:
      llmcalc params gpt2-xl
      llmcalc params mixtral-8x7b --json
      llmcalc params                 # every bundled model side by side
      llmcalc params ./my-model.yaml
    """
    cfgs = load_models(models)
    counts = [count_params(c) for c in cfgs]
    if json_out:
        print_json(one_or_list([params_json(c, p) for c, p in zip(cfgs, counts)], models))
        return
    if len(cfgs) == 1 and models:
        _breakdown(cfgs[0], counts[0])
        return
    rows = [(c.name, count(p.total), count(p.active), count(p.embedding), count(p.non_embedding),
             iec(weight_bytes(p.total, c.dtype)) + f" ({c.dtype})") for c, p in zip(cfgs, counts)]
    show("parameters", ["model", "total", "active", "embedding", "non-embedding",
                                       "weights"], rows)
