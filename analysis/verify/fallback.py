"""The fallback for a Hugging Face ``model_type`` that no mapper reads (DESIGN.md section 10; docs:
Hugging Face config.json, Models without a mapper): transformers' own causal LM for the config.json,
built on the meta device as ``verify --against transformers`` builds it (shapes only: no weights,
no memory, no network), and its state dict counted module by module, tied weights once. The figures
are labelled :data:`LABEL`: transformers counted them, and llmcalc explains none of them.

Only parameters: llmcalc's FLOPs, cache and memory figures sum over its layer plan, and such a model
has none. A FlopCounterMode forward of transformers' model would be a measurement of one workload,
unexplained and with data-dependent paths (MoE routing) that meta tensors cannot take, so the other
commands refuse the model instead (:func:`unmapped_message`).

torch and transformers are imported inside the functions: the CLI asks :func:`unmapped_message` on
the error path of every command, where the hf extra may be missing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..errors import ConfigError, UnmappedModelType, brief

LABEL = "counted by transformers, not explained"
EXTRA = "pip install 'llmcalc-exact[hf]'"  # pyproject.toml's hf extra: torch, numpy, transformers


@dataclass(frozen=True)
class ModuleCount:
    """The parameters of one module, or of one child of every layer (``model.layers.*.self_attn``)."""

    module: str
    layers: int  # the layers holding it; 0 for a module outside the layers
    per_layer: int | None  # its parameters in each of them, where all hold as many
    params: int


@dataclass(frozen=True)
class TransformersCount:
    model_type: str
    architecture: str  # the class transformers built, ``OPTForCausalLM``
    version: str  # transformers'
    total: int  # the state dict's numel: parameters and persistent buffers, each storage once
    embedding: int  # the input embedding's parameters
    lm_head: int  # the output embedding's own: 0 where it is the input embedding (tied), but a bias beside it
    tied: bool  # the output embedding's weight is the input embedding's
    modules: tuple[ModuleCount, ...]  # in the model's order; they sum to ``total``


def _causal_lms() -> frozenset[str] | None:
    """The model_types transformers has a causal LM for, or None without torch or transformers."""
    try:
        import torch  # noqa: F401 (first: transformers without torch reads configs but builds no model)
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return None
    return frozenset(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def counts(exc: UnmappedModelType) -> bool:
    """Whether the fallback counts the model ``exc`` refused: the hf extra is installed and
    transformers has a causal LM for its model_type."""
    lms = _causal_lms()
    return lms is not None and exc.model_type in lms


def unmapped_message(exc: UnmappedModelType) -> str:
    """The one line for a model_type without a mapper where the fallback does not count it: any
    command but `llmcalc params` with that model alone. Without the hf extra it says how to get it;
    for a model_type transformers has no causal LM for either, it is ``exc``'s own line."""
    lms = _causal_lms()
    if lms is None:
        return f"{exc}; `llmcalc params` counts it through transformers: {EXTRA}"
    if exc.model_type not in lms:
        return str(exc)
    return str(ConfigError(f"{brief(exc.model_type)} has no llmcalc mapper, so only `llmcalc params` counts it, "
                           "through transformers, with no other model and no --lora-rank (docs: Hugging Face "
                           "config.json, Models without a mapper)", exc.source, "model_type"))


def _group(name: str) -> tuple[str, str]:
    """(module, layer) of a state-dict key: a layer's child over every layer
    (``model.layers.3.self_attn.q_proj.weight`` -> ``model.layers.*.self_attn``, ``3``), else the
    module holding the tensor (``model.embed_tokens.weight`` -> ``model.embed_tokens``, no layer)."""
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part.isdigit():
            return ".".join([*parts[:i], "*", *parts[i + 1:i + 2]]), part
    return ".".join(parts[:-1]) or name, ""


def count_with_transformers(exc: UnmappedModelType) -> TransformersCount:
    """Transformers' model for the config.json ``exc`` refused, counted (see the module docstring).
    ConfigError when transformers cannot build it."""
    import transformers

    from .against import build_hf  # imports torch
    from .measure import _storage_id

    try:
        model = build_hf(exc.raw, exc.source)
    except ConfigError:
        raise
    except Exception as err:  # a family's own code, run on a config it may never have been written for
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"transformers cannot build this config: {reason}", exc.source) from None
    by_module: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seen: set[int] = set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if _storage_id(tensor) not in seen:  # a tied LM head is the embedding's tensor again
            seen.add(_storage_id(tensor))
            module, layer = _group(name)
            by_module[module][layer] += tensor.numel()
    modules = []
    for module, per in by_module.items():
        in_layers = "" not in per
        sizes = set(per.values())
        modules.append(ModuleCount(module, len(per) if in_layers else 0,
                                   sizes.pop() if in_layers and len(sizes) == 1 else None, sum(per.values())))

    def storages(module) -> dict[int, int]:  # storage -> numel of a module's parameters
        return {} if module is None else {_storage_id(p): p.numel() for p in module.parameters()}

    embedding = storages(model.get_input_embeddings())
    head = storages(model.get_output_embeddings())  # a model without an LM head has None
    lm_head = sum(n for storage, n in head.items() if storage not in embedding)  # a tied head's bias stays
    return TransformersCount(exc.model_type, type(model).__name__, transformers.__version__,
                             sum(m.params for m in modules), sum(embedding.values()), lm_head,
                             any(storage in embedding for storage in head), tuple(modules))
