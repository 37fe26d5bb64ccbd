"""llmcalc: exact, explained and checked numbers for transformer language models.

The small Python API (everything is pure Python; torch is imported only by ``verify``)::

    import llmcalc
    cfg = llmcalc.load_model("mistral-7b")         # bundled name, YAML or config.json path
    llmcalc.count_params(cfg).total                 # 7241732096
    run = llmcalc.RunSpec(mode="train", seq=4096, batch=8)
    llmcalc.count_flops(cfg, run).total.matmul_total
    llmcalc.kv_cache(cfg, llmcalc.RunSpec(mode="decode", seq=8192)).bytes
    llmcalc.memory(cfg, run).total

Each name is imported from its module on first use (PEP 562), so ``import llmcalc``, and the
command line, which imports this package first, load only the modules they use.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"  # the distribution's (pyproject reads it here)

_API = {
    "load_model": "load.catalog", "ModelConfig": "model.config", "ConfigError": "errors", "SpecError": "errors",
    "RunSpec": "spec", "Layout": "spec", "LoRA": "spec", "layer_plan": "model.layers", "build": "model.architecture",
    "count_params": "count.params", "count_flops": "count.flops", "kv_cache": "count.kvcache",
    "activation_bytes": "count.activations", "memory": "cluster.memory", "gpu_flops": "cluster.flops",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'llmcalc' has no attribute {name!r}")
    return getattr(importlib.import_module(f"llmcalc.analysis.{_API[name]}"), name)
