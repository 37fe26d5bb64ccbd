"""`llmcalc models` and `llmcalc params`."""

from ..analysis.count.lora import adapter_params
from ..analysis.count.params import ParamCount
from ..analysis.count.quant import checkpoint_bytes
from ..analysis.errors import UnmappedModelType
from ..analysis.model.config import ModelConfig
from ..analysis.model.formats import WEIGHT_FORMATS
from ..analysis.model.sizes import DTYPE_BITS
from ..analysis.spec import LoRA
from .common import family, load_models, lora_models, lora_record, lora_spec, one_or_list, params_of
from .fallback import by_transformers
from .format import count, group_label, iec, layer_list, share
from .options import Format, Json, LoraAlpha, LoraRank, LoraTargets, Models, output_format
from .report import Col, Report, Styled, Table, emit, group_json, pick, text_col


def models(fmt: Format = "table", json_out: Json = False) -> None:
    """List the bundled models.

    Examples:
      llmcalc models
      llmcalc models --format csv
    """
    fmt = output_format(fmt, json_out)
    records = [{"model": c.name, "family": family(c), "params": params_of(c).total, "n_layers": c.n_layers,
                "d_model": c.d_model, "n_heads": c.n_heads, "n_kv_heads": c.kv_heads,
                "context_length": c.context_length, "description": c.description}
               for c in load_models(None)]  # by family, then size
    sections: dict[str, list] = {}
    for r in records:
        sections.setdefault(r["family"], []).append(
            (r["model"], count(r["params"]), str(r["n_layers"]), str(r["d_model"]),
             f"{r['n_heads']}/{r['n_kv_heads']}", count(r["context_length"]), r["description"]))
    table = Table([text_col("model", key=True), Col("parameters"), Col("layers"), Col("d_model"), Col("heads/kv"),
                   Col("context"), text_col("description", optional=True)], list(sections.values()))
    emit(Report(records, records, [table]), fmt)


def params_json(cfg: ModelConfig, p: ParamCount) -> dict:
    return {"model": cfg.name, "total": p.total, "active": p.active, "components": p.components,
            "layer_groups": [group_json(g, params=sum(per.values()), components=per) for g, per in p.groups],
            "n_layers": cfg.n_layers, "embedding": p.embedding,
            "non_embedding": p.non_embedding,
            "weight_bytes": {dt: checkpoint_bytes(cfg, dt) for dt in (*DTYPE_BITS, *WEIGHT_FORMATS)},
            **({} if cfg.vision is None else {
                "language_model": p.language_model, "vision_tower": p.vision_tower, "projector": p.projector,
                "vision_layers": cfg.vision.n_layers, "vision_layer": p.vision_layer})}


def _lora_note(rec: dict) -> str:
    parts = ", ".join(f"{k} {count(n)}" for k, n in rec["components"].items())
    return (f"LoRA rank {rec['rank']} (alpha {rec['alpha']:g}, scaling {rec['scaling']:g}): {count(rec['trainable'])} "
            f"trainable parameters ({share(rec['trainable'], rec['frozen'])} of the {count(rec['frozen'])} frozen): "
            f"{parts}")


def _breakdown(cfg: ModelConfig, p: ParamCount, record: dict) -> Report:
    """One row per component; with several layer kinds, one row group per kind (its
    components per layer and over its layers) before the rest of the model. CSV: the same
    rows, less the kinds' subtotals."""
    L = cfg.n_layers
    csv = []

    def row(layers: str, key: str, per_layer: int | None, n: int, indent: str = "") -> tuple:
        csv.append({"model": cfg.name, "layers": layers, "component": key, "per_layer": per_layer, "params": n})
        return indent + key, count(per_layer) if per_layer is not None else "", count(n), share(n, p.total)

    columns = [text_col("component", key=True), Col("per layer"), Col("total"), Col("share")]
    vision = [k for k in p.components if k.startswith(("vision/", "projector/"))]
    text = [k for k in p.components if k not in vision]
    if len(p.groups) == 1:
        group, per_layer = p.groups[0]
        label = layer_list(group.layers)
        sections = [[row(label, key, per_layer[key], p.components[key]) if key in per_layer
                     else row("", key, None, p.components[key]) for key in text]]
        title = f"{cfg.name}: parameters ({L} layers)"
        footer = ["total", count(sum(per_layer.values())) if not vision else "", count(p.total), "100.0%"]
    else:
        layer_keys = {k for _, per in p.groups for k in per}
        sections = []
        for g, per in p.groups:
            subtotal = sum(per.values())
            sections.append([(Styled(group_label(g), "bold"), count(subtotal), count(subtotal * g.count),
                              share(subtotal * g.count, p.total))]
                            + [row(layer_list(g.layers), k, n, n * g.count, "  ") for k, n in per.items()])
        sections.append([row("", k, None, p.components[k]) for k in text if k not in layer_keys])
        title = f"{cfg.name}: parameters ({L} layers, {len(p.groups)} layer kinds)"
        footer = ["total", "", count(p.total), "100.0%"]
    if vision:  # the tower's layers, then the rest of the tower and the projector, apart from the language model
        per = p.vision_layer
        n = cfg.vision.n_layers
        sections.append([(Styled(f"vision tower ({n} layers)", "bold"), count(sum(per.values())),
                          count(p.vision_tower), share(p.vision_tower, p.total))]
                        + [row(f"vision 0-{n - 1}", k, per[k], p.components[k], "  ") if k in per
                           else row("vision", k, None, p.components[k], "  ")
                           for k in vision if k.startswith("vision/")])
        sections.append([(Styled("projector", "bold"), "", count(p.projector), share(p.projector, p.total))]
                        + [row("", k, None, p.components[k], "  ") for k in vision if k.startswith("projector/")])
    table = Table(columns, sections, title, footer=footer)
    notes = [f"active per token: {count(p.active)} ({share(p.active, p.total)} of total)"] \
        if p.active != p.total else []
    notes.append(f"embedding: {count(p.embedding)}   non-embedding: {count(p.non_embedding)}")
    if vision:
        notes.append(f"language model: {count(p.language_model)}   vision tower: {count(p.vision_tower)}   "
                     f"projector: {count(p.projector)}")
    sizes = "   ".join(f"{dt} {iec(record['weight_bytes'][dt])}" for dt in ("fp32", "bf16", "fp8", "nf4-dq"))
    notes.append(f"weights: {sizes}")
    if cfg.tie_embeddings:
        notes.append("LM head tied to the token embedding: counted once, under embedding/token.")
    return Report(record, csv, [table, *notes])


def lora_json(cfg: ModelConfig, p: ParamCount, lora: LoRA) -> dict:
    """Trainable adapters and the frozen base (analysis.count.lora)."""
    record = lora_record(cfg, lora)
    adapters = adapter_params(cfg, lora)
    return {**record, "trainable": sum(adapters.values()), "frozen": p.total, "components": adapters}


def params(models: Models = None, lora_rank: LoraRank = None, lora_alpha: LoraAlpha = None,
           lora_targets: LoraTargets = None, fmt: Format = "table", json_out: Json = False) -> None:
    """Exact parameter counts: a per-component breakdown for one model, a row per model
    for several. With --lora-rank: the LoRA adapters' trainable parameters beside the frozen
    base.

    Examples:
      llmcalc params gpt2-xl
      llmcalc params mixtral-8x7b --json
      llmcalc params gpt2-xl --format csv
      llmcalc params ./my-model.yaml
      llmcalc params          # every bundled model
      llmcalc params llama-2-7b --lora-rank 16
      llmcalc params ./rwkv-169m/   # no mapper: by transformers
    """
    fmt = output_format(fmt, json_out)
    lora = lora_spec(lora_rank, lora_alpha, lora_targets)
    try:
        cfgs = lora_models(models, lora)
    except UnmappedModelType as exc:  # transformers counts it, named alone (llmcalc's breakdown has no rows for it)
        if len(models) > 1 or lora is not None:
            raise
        emit(by_transformers(exc), fmt)
        return
    counts = [params_of(c) for c in cfgs]
    records = [params_json(c, p) for c, p in zip(cfgs, counts)]
    if lora is not None:
        for c, p, r in zip(cfgs, counts, records):
            r["lora"] = lora_json(c, p, lora)
    if len(cfgs) == 1 and models:
        report = _breakdown(cfgs[0], counts[0], records[0])
        if lora is not None:
            report.blocks.append(_lora_note(records[0]["lora"]))
        emit(report, fmt)
        return
    extra = [Col("LoRA trainable")] if lora is not None else []
    rows = [(c.name, count(p.total), count(p.active), count(p.embedding), count(p.non_embedding),
             iec(r["weight_bytes"][c.dtype]) + f" ({c.dtype})", *([count(r["lora"]["trainable"])] if lora else []))
            for c, p, r in zip(cfgs, counts, records)]
    table = Table([text_col("model", key=True), Col("total"), Col("active"), Col("embedding"), Col("non-embedding"),
                   Col("weights"), *extra], [rows], "parameters")
    csv = [pick(r, "model", "total", "active", "embedding", "non_embedding", "n_layers",
                *(f"weight_bytes.{dt}" for dt in DTYPE_BITS), *(["lora.rank", "lora.trainable"] if lora else []))
           for r in records]
    emit(Report(one_or_list(records, models), csv, [table]), fmt)
