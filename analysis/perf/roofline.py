"""Time on one accelerator: the roofline of each component (DESIGN.md sections 8 and 11).

Ideal: ``time = max(compute, memory)`` per component, summed over components (no overlap between
them), where

- compute = matmul FLOPs / the dense peak of the compute dtype (of ``fp8`` for the layers' matmuls
  under ``--dtype fp8``, whose casts are a component of their own: :mod:`.float8`) + elementwise
  FLOPs / the ``fp32`` peak (elementwise kernels run on the vector units and compute in fp32, as
  PyTorch's do);
- memory = bytes moved (:mod:`analysis.count.traffic`) / the memory bandwidth.

Expected: the same terms at the fractions of the peaks the calibration gives each component's
kernels (or the :class:`Efficiency` overrides), plus each kernel's fixed latency
(:mod:`.calibration`). Every fraction is at most 1, so the expected time is never below the ideal.

FLOPs are those executed: flash attention skips the masked blocks (the causal convention),
eager attention computes the dense score matrix. A component is compute- or memory-bound by the
larger term; a pass by the kind of bound its time is mostly spent in.

``generate``: time to first token (the prefill of the prompt, chunked with ``run.chunk``), then
one decode step per further token; without a KV cache each step is a prefill of the whole prefix.
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ..count.flops import FlopBreakdown, approximations, count_flops
from ..count.traffic import pass_bytes
from ..errors import SpecError
from ..model.config import ModelConfig
from ..spec import Layout, RunSpec, check_new
from .blocks import Repeat
from .calibration import CALIBRATED, Efficiency, Rates, rates
from .float8 import CASTS, casts, fp8_keys
from .hardware import Hardware
from .polynomial import Counts
from .steps import chunk_every, count_sum, period, reached_steps, splits, thresholds, time_sum


@dataclass(frozen=True)  # not a NamedTuple: + adds the work, it does not join tuples
class Component:
    """One component's work on one accelerator and the time each roof gives it; its time is the
    larger of the two (ideal), and with the calibrated rates and kernel latencies (expected). The
    work of several passes (a chunked prefill's chunks) takes the sum of each pass's time."""

    matmul_flops: int
    elementwise_flops: int
    bytes: int
    compute_s: float
    memory_s: float
    expected_compute_s: float
    expected_memory_s: float
    latency_s: float  # its kernels' fixed cost
    # several passes: (ideal, expected) seconds, the sums of each pass's own (None: one pass, the times above)
    passes_s: tuple[float, float] | None = None

    @property
    def expected_s(self) -> float:
        if self.passes_s is not None:
            return self.passes_s[1]
        return max(self.expected_compute_s, self.expected_memory_s) + self.latency_s

    @property
    def expected_bound(self) -> str:
        """compute, memory, or latency when the kernels' fixed cost is the larger part."""
        if self.latency_s > max(self.expected_compute_s, self.expected_memory_s):
            return "latency"
        return "compute" if self.expected_compute_s >= self.expected_memory_s else "memory"

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.elementwise_flops

    @property
    def time_s(self) -> float:
        if self.passes_s is not None:
            return self.passes_s[0]
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
        """Two passes, one after the other: their work and their times add."""
        return Component(self.matmul_flops + other.matmul_flops, self.elementwise_flops + other.elementwise_flops,
                         self.bytes + other.bytes, self.compute_s + other.compute_s, self.memory_s + other.memory_s,
                         self.expected_compute_s + other.expected_compute_s,
                         self.expected_memory_s + other.expected_memory_s, self.latency_s + other.latency_s,
                         (self.time_s + other.time_s, self.expected_s + other.expected_s))


ZERO = Component(0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)  # as Component
class Roofline:
    """A pass component by component; its time is the sum of theirs (no overlap between them)."""

    run: RunSpec  # resolved; causal as executed
    components: dict[str, Component]

    @property
    def time_s(self) -> float:
        return sum(c.time_s for c in self.components.values())

    @property
    def expected_s(self) -> float:
        return sum(c.expected_s for c in self.components.values())

    @property
    def expected_bound(self) -> str:
        """The kind of bound the expected time is mostly spent in."""
        spent: dict[str, float] = {}
        for c in self.components.values():
            spent[c.expected_bound] = spent.get(c.expected_bound, 0.0) + c.expected_s
        return max(spent, key=lambda k: spent[k]) if spent else "compute"

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
        return Roofline(self.run, {k: self.components.get(k, ZERO) + other.components.get(k, ZERO) for k in keys})


def roofline(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency = CALIBRATED) -> Roofline:
    """One pass (train: forward, backward and the optimizer step), unchunked, on one device (a
    GPU's step under a layout: :func:`analysis.cluster.step.step`; one GPU of an expert-parallel group
    reads only the experts it holds, ``count.flops.copies_read``)."""
    run.one_device("roofline", expert_group=True)
    run.no_images()
    run = run.resolve(cfg).executed()
    matmul, elementwise, moved = _work(cfg, run)
    keys = list(dict.fromkeys([*matmul, *elementwise, *moved]))
    expected = _expected(cfg, run, hw, eff, moved, keys)
    peaks = _peaks(cfg, run, hw)
    return Roofline(run, {key: _component(matmul.get(key, 0), elementwise.get(key, 0), moved.get(key, 0),
                                          peaks(key), expected[key]) for key in keys})


def _work(cfg: ModelConfig, run: RunSpec) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Matmul FLOPs, elementwise FLOPs and bytes by component of a pass (``run`` resolved and
    executed): the counted ones, and fp8's casts."""
    flops = _flops(cfg, run.replace(layout=Layout()))  # an expert-parallel GPU's: balanced routing
    matmul, elementwise, moved = dict(flops.matmul), dict(flops.elementwise), pass_bytes(cfg, run)
    if run.matmul_dtype == "fp8":
        elementwise[CASTS], moved[CASTS] = casts(cfg, run)
    return matmul, elementwise, moved


@functools.lru_cache(maxsize=256)  # `plan` asks for the pass of each expert-parallel group: the same FLOPs
def _flops(cfg: ModelConfig, run: RunSpec) -> FlopBreakdown:
    return count_flops(cfg, run).total


Peaks = Callable[[str], tuple[float, float, float]]


def _peaks(cfg: ModelConfig, run: RunSpec, hw: Hardware) -> Peaks:
    """A component's matmul FLOP/s, elementwise FLOP/s and bytes/s at the datasheet peaks (``run``
    resolved): the layers' matmuls at the fp8 peak under fp8, every other at the compute dtype's."""
    base = hw.peak(run.dtype), hw.peak("fp32"), hw.memory_bandwidth
    if run.matmul_dtype == run.dtype:
        return lambda key: base
    if run.matmul_dtype not in hw.peak_flops:
        raise SpecError("dtype", f"{run.matmul_dtype} (matmuls in {run.matmul_dtype}) needs an {run.matmul_dtype} "
                                 f"peak: {hw.name} lists none (it has {', '.join(hw.peak_flops)})")
    fast, keys = (hw.peak(run.matmul_dtype), *base[1:]), fp8_keys(cfg)
    return lambda key: fast if key in keys else base


def _expected(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency, moved: dict[str, int] | None = None,
              keys: list[str] | None = None) -> dict[str, Rates]:
    """Each component's calibrated rates in the pass ``run`` (resolved and executed): the
    calibration's fraction of each component's own matmul peak."""
    if moved is None or keys is None:
        matmul, elementwise, moved = _work(cfg, run)
        keys = list(dict.fromkeys([*matmul, *elementwise, *moved]))
    peaks = _peaks(cfg, run, hw)
    base = peaks("")[0]
    # fp8 matmuls with rowwise scales: the calibration's fraction of the tensorwise rate (no override)
    rowwise = hw.calibration.fp8_rowwise if run.fp8_scaling == "rowwise" and eff.compute is None else 1.0
    return {key: r._replace(matmul=r.matmul * peaks(key)[0] / base * (rowwise if peaks(key)[0] != base else 1.0))
            for key, r in rates(hw.calibration, peaks(""), cfg, run, moved, keys, eff).items()}


def _component(mm: int, ew: int, nbytes: int, peaks: tuple[float, float, float], r: Rates,
               passes: int = 1) -> Component:
    """A component of ``passes`` passes of the same kernels."""
    return Component(mm, ew, nbytes, mm / peaks[0] + ew / peaks[1], nbytes / peaks[2],
                     mm / r.matmul + ew / r.elementwise, nbytes / r.bandwidth, passes * r.latency_s)


def prefill(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency = CALIBRATED) -> Roofline:
    """A prefill of ``run.seq`` tokens, in chunks of ``run.chunk`` (each chunk a pass over its own
    queries against the cache and itself; only the last computes logits), the chunks before the last
    summed in closed form (:mod:`.steps`; their expected rates those of the middle chunk)."""
    run.one_device("prefill")
    run.no_images()
    run = run.resolve(cfg)
    last = run.replace(mode="prefill", chunk=None)
    if run.chunk is None or run.chunk >= run.seq:
        return dataclasses.replace(roofline(cfg, last, hw, eff), run=run.executed())
    size, n = run.chunk, -(-run.seq // run.chunk)

    def spec(i: int) -> RunSpec:
        return last.replace(seq=(i + 1) * size, past=i * size, logits=False)

    @functools.cache  # the counts' sum and each component's two time sums ask for the same chunks
    def chunk(i: int) -> Counts:
        return work_counts(cfg, spec(i))

    def alone(key: str) -> Callable[[int], Counts]:
        return lambda i: {key: chunk(i).get(key, (0, 0, 0))}

    margin = 4  # a chunk whose span comes this near a threshold is a piece of its own

    def near(p: int) -> set[int]:
        return {i + k for i in range((p - margin) // size - 1, (p + margin) // size + 1) for k in (0, 1)}

    starts = set().union(*map(near, thresholds(cfg)))
    every, repeat = chunk_every(cfg), None
    if every:  # the chunked layers' boundaries recur every lcm(C, size) tokens: lcm / size chunks
        span = math.lcm(every, size)
        repeat = Repeat(span // size, frozenset().union(*map(near, range(0, span, every))))
    summed = count_sum(chunk, 0, n - 2, starts, repeat=repeat)
    final = roofline(cfg, last.replace(past=(n - 1) * size), hw, eff)
    expected = _expected(cfg, spec((n - 2) // 2).resolve(cfg).executed(), hw, eff)
    peaks = _peaks(cfg, run, hw)
    components = {}
    for key, c in summed.items():  # each chunk's time its own max: the chunks' times summed in closed form
        part = _component(*c, peaks(key), expected[key], n - 1)
        ideal = time_sum(alone(key), lambda i: peaks, 0, n - 2, starts, repeat=repeat)
        calibrated = time_sum(alone(key), lambda i: lambda k: expected[k][:3], 0, n - 2, starts, repeat=repeat)
        components[key] = dataclasses.replace(part, passes_s=(ideal, calibrated + part.latency_s))
    total = Roofline(run, components) + final
    return dataclasses.replace(total, run=run.executed())  # the whole prefill's, not its first chunk's


def work_counts(cfg: ModelConfig, run: RunSpec) -> Counts:
    """Each component's (matmul FLOPs, elementwise FLOPs, bytes) in ``roofline(cfg, run, ...)``, without
    its times (no rates, no hardware)."""
    matmul, elementwise, moved = _work(cfg, run.resolve(cfg).executed())
    return {k: (matmul.get(k, 0), elementwise.get(k, 0), moved.get(k, 0))
            for k in dict.fromkeys([*matmul, *elementwise, *moved])}


class Generation(NamedTuple):
    new: int
    first: Roofline  # the prefill of the prompt: time to first token
    decode_s: float  # the new - 1 decode steps after it
    no_cache_s: float  # the same steps, each recomputing the whole prefix (no KV cache)
    expected_decode_s: float
    expected_no_cache_s: float
    first_comm_s: float = 0.0  # under a layout, the prefill's communication (:mod:`analysis.cluster.generation`)
    expected_first_comm_s: float = 0.0

    def ttft_s(self, expected: bool) -> float:
        if expected:
            return self.first.expected_s + self.expected_first_comm_s
        return self.first.time_s + self.first_comm_s

    def tpot_s(self, expected: bool) -> float:
        """Time per output token after the first (0 for one new token)."""
        decode = self.expected_decode_s if expected else self.decode_s
        return decode / (self.new - 1) if self.new > 1 else 0.0

    def total_s(self, expected: bool) -> float:
        return self.ttft_s(expected) + (self.expected_decode_s if expected else self.decode_s)

    def no_cache_total_s(self, expected: bool) -> float:
        return self.ttft_s(expected) + (self.expected_no_cache_s if expected else self.no_cache_s)

    def tokens_per_s(self, batch: int, expected: bool) -> float:
        return batch * self.new / self.total_s(expected)


def generate(cfg: ModelConfig, run: RunSpec, hw: Hardware, prompt: int, new: int,
             eff: Efficiency = CALIBRATED) -> Generation:
    """``prompt`` tokens, then ``new`` tokens per sequence: the prefill gives the first, each
    decode step one more (its context is the prompt and the tokens so far)."""
    run.one_device("generate")
    first = prefill(cfg, run.replace(mode="prefill", seq=prompt), hw, eff)
    return Generation(new, first, *decode_sums(cfg, run, hw, prompt, new, eff))


def decode_sums(cfg: ModelConfig, run: RunSpec, hw: Hardware, prompt: int, new: int,
                eff: Efficiency = CALIBRATED) -> tuple[float, float, float, float]:
    """The ``new - 1`` decode steps after a prompt on one device (or one GPU of an expert-parallel group),
    summed in closed form: ideal, then without a KV cache (each step a prefill of the prefix), and the same
    two expected."""
    check_new(new)
    if new == 1:
        return 0.0, 0.0, 0.0, 0.0
    run = run.replace(mode="prefill", seq=prompt + 1, chunk=None).resolve(cfg)
    peaks, (lo, hi) = _peaks(cfg, run, hw), (prompt + 1, prompt + new - 1)
    starts = splits(thresholds(cfg))
    # a no-cache pass of a longer prefix reaches more routed experts; a decode step's batch reaches the same ones
    reached = reached_steps(cfg, run.batch, hi, run.layout.ep)
    every = chunk_every(cfg)
    repeat = Repeat(every, frozenset(splits([0]))) if every else None  # each chunk's first position, split alike
    # a piece's passes take its middle pass's calibrated rates; a no-cache pass's GEMM rows grow with the
    # context (a decode step's are the batch, but eager MLA's kv_b over the keys), and a decode step's attention
    # transfer with it (the streaming fraction of its K, V, query and output together): pieces split at each doubling
    doublings = {1 << k for k in range(lo.bit_length(), hi.bit_length())}

    def sums(mode: str, starts: set[int]) -> tuple[float, float]:
        """(ideal, expected) sums of the passes' times."""
        def spec(s: int) -> RunSpec:
            return run.replace(mode=mode, seq=s).resolve(cfg).executed()

        def expected(s: int) -> Callable[[str], tuple[float, float, float]]:
            r = _expected(cfg, spec(s), hw, eff)
            return lambda key: r[key][:3]

        @functools.cache  # the ideal's sum and the expected's ask for the same passes
        def f(s: int) -> Counts:
            return work_counts(cfg, run.replace(mode=mode, seq=s))

        step = period(cfg, run.replace(mode=mode))
        ideal = time_sum(f, lambda s: peaks, lo, hi, starts, step, repeat)
        latency = sum(r.latency_s for r in _expected(cfg, spec(lo), hw, eff).values())  # the same kernels each pass
        return ideal, time_sum(f, expected, lo, hi, starts | doublings, step, repeat) + (hi - lo + 1) * latency

    (decode, expected_decode), (no_cache, expected_no_cache) = sums("decode", starts), sums("prefill", starts | reached)
    return decode, no_cache, expected_decode, expected_no_cache


class Utilization(NamedTuple):
    """MFU and HFU of a training run at ``tokens_per_s`` over ``gpus`` GPUs (PaLM, appendix B):
    achieved FLOP/s / peak FLOP/s, with the FLOPs per token counted four ways."""

    tokens_per_s: float
    gpus: int
    model_flops_per_token: float  # llmcalc's matmul FLOPs: dense attention, no recomputation (flash's neither)
    hardware_flops_per_token: float  # as executed: flash skips masked blocks, recomputation counts
    six_n_per_token: float  # 6N, N the non-embedding (active) parameters
    palm_per_token: float  # 6N + 12 L H Q T
    peak: float  # FLOP/s of one GPU in the matmuls' dtype (fp8 under --dtype fp8: MFU stays at most 1)

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
    run.no_images()
    run = run.resolve(cfg)
    tokens = run.tokens
    # model FLOPs (PaLM): no recomputation, not even flash attention's rerun of the scores in backward
    model = count_flops(cfg, run.replace(causal=False, recompute="none", attention="eager")).total.matmul_total
    executed = count_flops(cfg, run.executed()).total.matmul_total
    approx = approximations(cfg, run)
    return Utilization(tokens_per_s, gpus, model / tokens, executed / tokens, approx.six_n / tokens,
                       approx.palm / tokens, hw.peak(run.matmul_dtype))
