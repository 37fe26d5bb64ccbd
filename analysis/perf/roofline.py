"""Time on one accelerator: the roofline of each component (DESIGN.md section 8).

``time = max(compute, memory)`` per component, summed over components (no overlap between
them), where

- compute = matmul FLOPs / the dense peak of the compute dtype + elementwise FLOPs / the ``fp32``
  peak (elementwise kernels run on the vector units and compute in fp32, as PyTorch's do),
  divided by the ``mfu`` knob (the fraction of peak a real kernel reaches; 1 is the ideal roofline);
- memory = bytes moved (:mod:`analysis.traffic`) / the memory bandwidth, divided by the
  ``bandwidth`` knob.

FLOPs are those executed: flash attention skips the masked blocks (the causal convention),
eager attention computes the dense score matrix. A component is compute- or memory-bound by the
larger term; a pass by the kind of bound its time is mostly spent in.

``generate``: time to first token (the prefill of the prompt, chunked with ``run.chunk``), then
one decode step per further token; without a KV cache each step is a prefill of the whole prefix.
"""

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ..count.flops import approximations, count_flops
from ..count.traffic import pass_bytes
from ..errors import SpecError
from ..model.config import ModelConfig
from ..spec import RunSpec
from .hardware import Hardware
from .steps import Counts, count_sum, flash_reads, splits, thresholds, time_sum


@dataclass(frozen=True)
class Efficiency:
    """Fractions of the datasheet peaks a run reaches (1, 1: the ideal roofline)."""

    mfu: float = 1.0  # of peak FLOP/s
    bandwidth: float = 1.0  # of memory bandwidth

    def __post_init__(self) -> None:
        for name in ("mfu", "bandwidth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise SpecError(f"efficiency.{name}", f"must be in (0, 1], got {value!r}")


@dataclass(frozen=True)  # not a NamedTuple: + adds the work, it does not join tuples
class Component:
    """One component's work on one accelerator and the time each roof gives it; its time is the
    larger of the two."""

    matmul_flops: int
    elementwise_flops: int
    bytes: int
    compute_s: float
    memory_s: float

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.elementwise_flops

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def flops_per_s(self) -> float:
        """The FLOP/s its roofline time gives it (the attainable rate at its intensity)."""
        return self.flops / self.time_s

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte moved (None: it moves nothing of its own)."""
        return self.flops / self.bytes if self.bytes else None

    def __add__(self, other: "Component") -> "Component":
        return Component(self.matmul_flops + other.matmul_flops, self.elementwise_flops + other.elementwise_flops,
                         self.bytes + other.bytes, self.compute_s + other.compute_s, self.memory_s + other.memory_s)


@dataclass(frozen=True)  # as Component
class Roofline:
    """A pass component by component; its time is the sum of theirs (no overlap between them)."""

    run: RunSpec  # resolved; causal as executed
    components: dict[str, Component]

    @property
    def time_s(self) -> float:
        return sum(c.time_s for c in self.components.values())

    @property
    def flops(self) -> int:
        return sum(c.flops for c in self.components.values())

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.components.values())

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.time_s

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.time_s

    @property
    def tokens_per_s(self) -> float:
        """Tokens the pass processes per second (a training step's throughput on one GPU)."""
        return self.run.tokens / self.time_s

    @property
    def bound(self) -> str:
        compute = sum(c.time_s for c in self.components.values() if c.bound == "compute")
        return "compute" if compute >= self.time_s - compute else "memory"

    def __add__(self, other: "Roofline") -> "Roofline":
        keys = dict.fromkeys([*self.components, *other.components])
        zero = Component(0, 0, 0, 0.0, 0.0)
        return Roofline(self.run, {k: self.components.get(k, zero) + other.components.get(k, zero) for k in keys})


def roofline(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency = Efficiency()) -> Roofline:
    """One pass (train: forward, backward and the optimizer step), unchunked, on one device (a
    GPU's step under a layout: :func:`analysis.cluster.step.step`)."""
    run.one_device("roofline")
    run.no_images("roofline")
    run = run.resolve(cfg).executed()
    flops = count_flops(cfg, run).total
    moved = pass_bytes(cfg, run)
    matmul_peak, vector_peak = hw.peak(run.dtype) * eff.mfu, hw.peak("fp32") * eff.mfu
    bandwidth = hw.memory_bandwidth * eff.bandwidth
    components = {}
    for key in dict.fromkeys([*flops.matmul, *flops.elementwise, *moved]):
        mm, ew, nbytes = flops.matmul.get(key, 0), flops.elementwise.get(key, 0), moved.get(key, 0)
        components[key] = Component(mm, ew, nbytes, mm / matmul_peak + ew / vector_peak, nbytes / bandwidth)
    return Roofline(run, components)


def prefill(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency = Efficiency()) -> Roofline:
    """A prefill of ``run.seq`` tokens, in chunks of ``run.chunk`` (each chunk a pass over its own
    queries against the cache and itself; only the last computes logits), the chunks before the last
    summed in closed form (:mod:`.steps`)."""
    run.one_device("prefill")
    run.no_images("prefill")
    run = run.resolve(cfg)
    last = run.replace(mode="prefill", chunk=None)
    if run.chunk is None or run.chunk >= run.seq:
        return dataclasses.replace(roofline(cfg, last, hw, eff), run=run.executed())
    size, n = run.chunk, -(-run.seq // run.chunk)

    def chunk(i: int) -> Counts:
        return counts(roofline(cfg, last.replace(seq=(i + 1) * size, past=i * size, logits=False), hw, eff))

    points, period = thresholds(cfg, run.batch, run.seq)
    margin = 2 * period + 2  # a chunk whose span comes this near a threshold is a piece of its own
    starts = {i + k for p in points for i in range((p - margin) // size - 1, (p + margin) // size + 1)
              for k in (0, 1)}
    summed = count_sum(chunk, 0, n - 2, starts)
    final = roofline(cfg, last.replace(past=(n - 1) * size), hw, eff)
    rates = _rates(run, hw, eff)
    total = Roofline(run, {key: _component(*c, rates) for key, c in summed.items()}) + final
    return dataclasses.replace(total, run=run.executed())  # the whole prefill's, not its first chunk's


def counts(r: Roofline) -> Counts:
    return {k: (c.matmul_flops, c.elementwise_flops, c.bytes) for k, c in r.components.items()}


def _rates(run: RunSpec, hw: Hardware, eff: Efficiency) -> tuple[float, float, float]:
    """Matmul FLOP/s, elementwise FLOP/s and bytes/s (``run`` resolved)."""
    return hw.peak(run.dtype) * eff.mfu, hw.peak("fp32") * eff.mfu, hw.memory_bandwidth * eff.bandwidth


def _component(mm: int, ew: int, nbytes: int, rates: tuple[float, float, float]) -> Component:
    return Component(mm, ew, nbytes, mm / rates[0] + ew / rates[1], nbytes / rates[2])


class Generation(NamedTuple):
    new: int
    first: Roofline  # the prefill of the prompt: time to first token
    decode_s: float  # the new - 1 decode steps after it
    no_cache_s: float  # the same steps, each recomputing the whole prefix (no KV cache)

    @property
    def ttft_s(self) -> float:
        return self.first.time_s

    @property
    def tpot_s(self) -> float:
        """Time per output token after the first (0 for one new token)."""
        return self.decode_s / (self.new - 1) if self.new > 1 else 0.0

    @property
    def total_s(self) -> float:
        return self.ttft_s + self.decode_s

    @property
    def no_cache_total_s(self) -> float:
        return self.ttft_s + self.no_cache_s

    def tokens_per_s(self, batch: int) -> float:
        return batch * self.new / self.total_s


def generate(cfg: ModelConfig, run: RunSpec, hw: Hardware, prompt: int, new: int,
             eff: Efficiency = Efficiency()) -> Generation:
    """``prompt`` tokens, then ``new`` tokens per sequence: the prefill gives the first, each
    decode step one more (its context is the prompt and the tokens so far)."""
    run.one_device("generate")
    first = prefill(cfg, run.replace(mode="prefill", seq=prompt), hw, eff)
    if new == 1:
        return Generation(new, first, 0.0, 0.0)
    run = run.replace(mode="prefill", seq=prompt + 1, chunk=None).resolve(cfg)
    rates, (lo, hi) = _rates(run, hw, eff), (prompt + 1, prompt + new - 1)
    points, period = thresholds(cfg, run.batch, hi)
    starts = splits(points, period)

    def step(mode: str) -> Callable[[int], Counts]:
        return lambda s: counts(roofline(cfg, run.replace(mode=mode, seq=s), hw, eff))

    decode = time_sum(step("decode"), rates, lo, hi, starts)
    # without a cache each step is a prefill of the prefix, whose flash tile reads are periodic in it
    periodic = (lambda s: flash_reads(cfg, run.replace(seq=s))) if run.attention == "flash" else None
    no_cache = time_sum(step("prefill"), rates, lo, hi, starts, periodic, period)
    return Generation(new, first, decode, no_cache)


class Utilization(NamedTuple):
    """MFU and HFU of a training run at ``tokens_per_s`` over ``gpus`` GPUs (PaLM, appendix B):
    achieved FLOP/s / peak FLOP/s, with the FLOPs per token counted three ways."""

    tokens_per_s: float
    gpus: int
    model_flops_per_token: float  # llmcalc's matmul FLOPs: dense attention, no recomputation
    hardware_flops_per_token: float  # as executed: flash skips masked blocks, recomputation counts
    six_n_per_token: float  # 6N, N the non-embedding (active) parameters
    palm_per_token: float  # 6N + 12 L H Q T
    peak: float  # FLOP/s of one GPU

    def of(self, per_token: float) -> float:
        return self.tokens_per_s * per_token / (self.gpus * self.peak)

    @property
    def mfu(self) -> float:
        return self.of(self.model_flops_per_token)

    @property
    def hfu(self) -> float:
        return self.of(self.hardware_flops_per_token)

    def run_time_s(self, tokens: float) -> float:
        """Wall time to train on ``tokens`` tokens at this throughput."""
        return tokens / self.tokens_per_s

    def gpu_hours(self, tokens: float) -> float:
        return self.run_time_s(tokens) * self.gpus / 3600


def utilization(cfg: ModelConfig, run: RunSpec, hw: Hardware, tokens_per_s: float, gpus: int = 1) -> Utilization:
    """``run`` is one GPU's training step; ``tokens_per_s`` the throughput of all ``gpus``."""
    run.no_images("utilization")
    run = run.resolve(cfg)
    tokens = run.tokens
    model = count_flops(cfg, run.replace(causal=False, recompute="none")).total.matmul_total
    executed = count_flops(cfg, run.executed()).total.matmul_total
    approx = approximations(cfg, run)
    return Utilization(tokens_per_s, gpus, model / tokens, executed / tokens, approx.six_n / tokens,
                       approx.palm / tokens, hw.peak(run.dtype))
