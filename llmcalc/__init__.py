"""llmcalc: exact, explained and checked numbers for transformer language models.

The small Python API (everything is pure Python; torch is imported only by ``verify``)::

    import llmcalc
    cfg = llmcalc.load_model("mistral-7b")         # bundled name, YAML or config.json path
    llmcalc.count_params(cfg).total                 # 7241732096
    run = llmcalc.RunSpec(mode="train", seq=4096, batch=8)
    llmcalc.count_flops(cfg, run).total.matmul_total
    llmcalc.kv_cache(cfg, llmcalc.RunSpec(mode="decode", seq=8192)).bytes
    llmcalc.memory(cfg, run).total

Attributes are imported on first use, so ``import llmcalc`` (and the CLI) stay fast.
"""

from __future__ import annotations

import importlib

_API = {
    "load_model": "config", "ModelConfig": "config", "ConfigError": "config",
    "RunSpec": "run", "layer_plan": "plan",
    "count_params": "params", "count_flops": "flops", "kv_cache": "kvcache", "memory": "memory",
    "activation_bytes": "activations", "LoRA": "lora",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'llmcalc' has no attribute {name!r}")
    return getattr(importlib.import_module(f"llmcalc.analysis.{_API[name]}"), name)
