"""`llmcalc params` for a config.json whose model_type llmcalc has no mapper for: transformers' own
model counted module by module (:mod:`analysis.verify.fallback`), and labelled so in every format."""

from ..analysis.errors import UnmappedModelType
from .format import count, share
from .report import Col, Report, Table, text_col


def by_transformers(exc: UnmappedModelType) -> Report:
    """The report of transformers' count of the model ``exc`` refused; ``exc`` again where the
    fallback does not count it (no hf extra, or no causal LM in transformers for its model_type)."""
    from ..analysis.verify.fallback import LABEL, count_with_transformers, counts  # torch and transformers

    if not counts(exc):
        raise exc
    c = count_with_transformers(exc)
    record = {"model": exc.name, "model_type": c.model_type, "counted_by": "transformers",
              "transformers_version": c.version, "architecture": c.architecture, "total": c.total,
              "active": None, "embedding": c.embedding, "lm_head": c.lm_head, "tie_embeddings": c.tied,
              "components": {m.module: m.params for m in c.modules},
              "modules": [{"module": m.module, "layers": m.layers, "per_layer": m.per_layer, "params": m.params}
                          for m in c.modules]}
    csv = [{"model": exc.name, "counted_by": "transformers", **m} for m in record["modules"]]
    rows = [(m.module, count(m.layers) if m.layers else "", "" if m.per_layer is None else count(m.per_layer),
             count(m.params), share(m.params, c.total)) for m in c.modules]
    table = Table([text_col("module", key=True), Col("layers"), Col("per layer"), Col("total"), Col("share")],
                  [rows], f"{exc.name}: parameters ({c.architecture}, transformers {c.version})",
                  footer=["total", "", "", count(c.total), "100.0%"])
    head = count(c.lm_head) if not c.tied else "tied to the embedding, counted once" + (
        f", with a bias of {count(c.lm_head)}" if c.lm_head else "")
    return Report(record, csv, [
        table,
        f"{LABEL} (model_type {c.model_type!r} has no llmcalc mapper; docs: Models without a mapper)",
        f"embedding: {count(c.embedding)}   LM head: {head}"])
