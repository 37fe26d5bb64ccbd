"""Measurements that need a CUDA device: wall time, achieved FLOP/s, peak memory.

One training step (forward, cross-entropy, backward) in bf16 with eager attention (the
reference's flash path calls the CPU kernel). Peak memory is
``torch.cuda.max_memory_allocated`` over that step, compared with the analytic weights +
gradients + saved activations + one layer's pre-softmax scores. The caching
allocator, cuBLAS workspaces and gradient buffers still being filled while activations
are freed make the true peak differ from that sum, so the check passes within
``PEAK_TOLERANCE`` (relative). Wall time and FLOP/s are reported, not judged.

A model whose analytic peak exceeds ``FIT_FRACTION`` of the device is measured with
fewer layers (the check's name says how many): per-layer figures are what is checked.
"""

from __future__ import annotations

import time

import torch

from ..activations import activation_bytes
from ..config import ModelConfig
from ..flops import count_flops
from ..memory import attention_bytes, training_state
from ..run import RunSpec
from .check import Check
from .measure import _loss, build

PEAK_TOLERANCE = 0.25
FIT_FRACTION = 0.8


def analytic_peak(cfg: ModelConfig, seq: int, batch: int) -> int:
    state = training_state(cfg, "bf16", "sgd")  # no optimizer step in the measured window
    run = RunSpec("train", seq, batch, "eager", dtype="bf16")
    return (state.weights + state.gradients + activation_bytes(cfg, run).total
            + attention_bytes(cfg, batch, seq, seq, "eager", "bf16", training=True))


def _fitting(cfg: ModelConfig, seq: int, batch: int) -> ModelConfig:
    budget = FIT_FRACTION * torch.cuda.get_device_properties(0).total_memory
    layers = cfg.n_layers
    while layers > 1 and analytic_peak(cfg.replace(n_layers=layers), seq, batch) > budget:
        layers -= 1
    return cfg.replace(n_layers=layers)


def gpu_checks(cfg: ModelConfig, seq: int, batch: int):
    cfg = _fitting(cfg, seq, batch)
    model = build(cfg, "eager", "cuda", torch.bfloat16)
    tokens = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    for _ in range(2):  # the first step warms kernels and allocates the gradients
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        _loss(model(tokens), tokens).backward()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated()
    expected = analytic_peak(cfg, seq, batch)
    flops = count_flops(cfg, RunSpec("train", seq, batch, "eager")).total.matmul_total
    label = f"cuda/{cfg.n_layers} layers"
    return [
        Check(f"{label}/peak memory (bytes)", expected, peak,
              abs(peak - expected) <= PEAK_TOLERANCE * expected,
              f"within {PEAK_TOLERANCE:.0%} of weights + gradients + activations + attention"),
        Check(f"{label}/wall time (s), info", 0.0, seconds, True, "one training step"),
        Check(f"{label}/achieved TFLOP/s, info", 0.0, flops / seconds / 1e12, True,
              "analytic matmul FLOPs / wall time"),
    ]
