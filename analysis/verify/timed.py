"""Timed runs of the reference model against the roofline (``verify --device cuda``).

Three phases, each run ``WARMUP`` times and then timed ``RUNS`` times (the median is kept):

- ``prefill S``: a forward of ``batch x S`` tokens into a KV cache, logits of the last position;
- ``decode S+1``: one new token per sequence after that prefill (each run rewrites the same slot);
- ``train S``: forward, cross-entropy and backward (no optimizer step: the roofline's
  ``optimizer`` component is left out of the comparison).

Flash attention throughout (``F.scaled_dot_product_attention`` on a GPU), bf16 on a GPU and fp32
on the CPU. On a GPU the time is taken with CUDA events; on the CPU with ``time.perf_counter``,
which is how this path is tested without a GPU.

Each phase reports the roofline time of :func:`analysis.perf.roofline.roofline` (ideal: efficiency 1)
against the measured one, the achieved FLOP/s (executed FLOPs, matmul and elementwise, over the
measured time) and GB/s (the bytes of :mod:`analysis.traffic` over it) against the roofline's,
and the fraction of the roofline reached (roofline time / measured time). These are reported,
not judged: a roofline is a bound, not a prediction.

On a GPU the training step's peak ``torch.cuda.max_memory_allocated`` is checked against the
analytic weights + gradients + saved activations, within ``PEAK_TOLERANCE`` (relative): the
caching allocator, cuBLAS workspaces and gradients being filled while activations are freed keep
it from being exact. The tolerance is provisional until it has been measured on a GPU. The
inference peak is reported against ``memory --mode inference`` (which leaves out the transient
MLP activations of a long prefill), not judged.

A model whose analytic training peak exceeds ``FIT_FRACTION`` of the device runs with fewer
layers (the checks' names say how many): per-layer figures are what is compared.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from ..cluster.memory import memory
from ..count.activations import activation_bytes
from ..count.memory import trained_state
from ..model.config import ModelConfig
from ..perf.hardware import Hardware
from ..perf.roofline import Roofline, roofline
from ..spec import RunSpec
from .cache import KVCache
from .check import Check
from .measure import build, training_loss

WARMUP, RUNS = 2, 5
PEAK_TOLERANCE = 0.25
FIT_FRACTION = 0.8
DTYPES = {"cuda": ("bf16", torch.bfloat16), "cpu": ("fp32", torch.float32)}


def median_seconds(step: Callable[[], object], device: str, warmup: int = WARMUP, runs: int = RUNS) -> float:
    """Median wall time of ``step()`` over ``runs`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(runs):
        if device == "cuda":  # events on the stream: the kernels' time, not the launch's
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def train_peak(cfg: ModelConfig, run: RunSpec) -> int:
    """Analytic peak of a training step without an optimizer: weights, gradients, saved activations
    (flash attention keeps no score matrix)."""
    state = trained_state(cfg, run.resolve(cfg).replace(optimizer="sgd"))
    return state.weights + state.gradients + activation_bytes(cfg, run).total


def phases(seq: int, batch: int, dtype: str) -> dict[str, RunSpec]:
    """The timed runs by mode."""
    spec = {"batch": batch, "attention": "flash", "dtype": dtype, "weights_dtype": dtype}
    return {"prefill": RunSpec("prefill", seq, **spec, kv_dtype=dtype), "decode": RunSpec("decode", seq + 1, **spec,
                                                                                          kv_dtype=dtype),
            "train": RunSpec("train", seq, **spec)}


def _fitting(cfg: ModelConfig, run: RunSpec) -> ModelConfig:
    budget = FIT_FRACTION * torch.cuda.get_device_properties(0).total_memory
    layers = cfg.n_layers
    while layers > 1 and train_peak(cfg.replace(n_layers=layers), run) > budget:
        layers -= 1
    return cfg.replace(n_layers=layers)


def _compared(label: str, r: Roofline, seconds: float) -> list[Check]:
    """Measured against the roofline: time, FLOP/s, bytes/s, fraction reached."""
    ideal = r.time_s
    note = f"median of {RUNS} runs after {WARMUP} warm-up; analytic: the ideal roofline"
    return [Check(f"{label}/time (s), info", ideal, seconds, True, note),
            Check(f"{label}/achieved TFLOP/s, info", r.flops_per_s / 1e12, r.flops / seconds / 1e12, True),
            Check(f"{label}/achieved GB/s, info", r.bytes_per_s / 1e9, r.bytes / seconds / 1e9, True),
            Check(f"{label}/fraction of roofline, info", 1.0, ideal / seconds, True)]


def timed_checks(cfg: ModelConfig, device: str, seq: int, batch: int, hw: Hardware) -> list[Check]:
    """Each phase timed on ``device`` (cuda or cpu) and compared with ``hw``'s roofline."""
    dtype, torch_dtype = DTYPES[device]
    runs = phases(seq, batch, dtype)
    layers = cfg.n_layers
    if device == "cuda":
        cfg = _fitting(cfg, runs["train"])
    model = build(cfg, "flash", device, torch_dtype)
    tokens = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
    step = tokens[:, :1]
    prefix = hw.name + (f"/{cfg.n_layers} layers" if cfg.n_layers < layers else "")
    labels = {mode: f"{prefix}/{mode} {run.seq}" for mode, run in runs.items()}
    out: list[Check] = []
    peaks: dict[str, int] = {}

    def timed(mode: str, fn: Callable[[], object]) -> None:
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        seconds = median_seconds(fn, device)
        if device == "cuda":
            peaks[mode] = torch.cuda.max_memory_allocated()
        r = roofline(cfg, runs[mode], hw)
        if mode == "train":  # the step is timed without an optimizer
            r = Roofline(r.run, {k: c for k, c in r.components.items() if k != "optimizer"})
        out.extend(_compared(labels[mode], r, seconds))

    with torch.no_grad():  # the cache is freed before the training step
        cache = KVCache(cfg, batch, seq + 1, torch_dtype, device)
        timed("prefill", lambda: model(tokens, cache, 0, logits="last"))
        timed("decode", lambda: model(step, cache, seq, logits="last"))
        cache = None

    def train_step() -> None:
        model.zero_grad(set_to_none=True)
        training_loss(model(tokens), tokens).backward()

    timed("train", train_step)
    if device == "cuda":
        expected = train_peak(cfg, runs["train"])
        out.append(Check(f"{labels['train']}/peak memory (bytes)", expected, peaks["train"],
                         abs(peaks["train"] - expected) <= PEAK_TOLERANCE * expected,
                         f"within {PEAK_TOLERANCE:.0%} of weights + gradients + saved activations (provisional)"))
        inference = memory(cfg, runs["prefill"]).total
        out.append(Check(f"{labels['prefill']}/peak memory (bytes), info", inference, peaks["prefill"],
                         True, "memory --mode inference: weights, KV cache, attention, last logits"))
    return out
