"""A calibration fitted to a machine's own timings (`llmcalc hardware calibrate`), and the hardware
YAML that carries it. The timings come from :mod:`analysis.verify.calibrate` (torch); this module
is pure Python.

Each term of :mod:`analysis.perf.calibration` is fitted to the rates its sweep measured, in its
saturating form ``rate = top x prod s/(s + s0)``: the ``s0`` on a grid of half octaves (0, 1, 1.4,
2, ... 65,536; bytes up to 1 TiB), ``top`` in closed form, by least squares on the logarithms (every point weighs
alike, small and large), ``top`` at most the peak. A run's time less the fixed cost of a kernel
(``kernel_s``, the median of a one-element kernel; at most half of the run) is its busy time, as
the expected model adds that cost to every kernel.

- memory: copies of a few sizes, bytes moved (read and written) over the busy time:
  ``streaming.float`` and ``streaming_b0``; an ``a + b = c`` of the largest size: ``elementwise``;
- GEMMs in the compute dtype (bf16 on CUDA, fp32 on the CPU): ``gemm``, ``gemm_m0``, ``gemm_n0``
  (``n0`` for both n and k, as in the model), from the shapes that the fitted streaming rate says
  are compute-bound (their bytes take at most half the busy time; all shapes when fewer than two
  are);
- flash attention (one head per K/V head, queries = keys, no mask; FLOPs ``4 x q x k x d`` a head):
  ``flash``, ``flash_q0``, ``flash_d0``, from the compute-bound runs likewise;
- all-reduce over the visible GPUs (one process, NCCL): bytes each GPU sends, ``2(n-1)/n`` of its
  buffer (the bus factor the model's collectives carry), over the time: ``bus_intra`` of the link
  and ``latency_intra_us = s0 / rate``.

The peaks and links are the base's (``--hardware``; on CUDA the bundled spec of the device by
default). Without one, the peaks are the fitted ``top`` (at most twice the best rate measured), so
that the fractions are 1 and the sizes carry the rest; the fp32 peak is an fp32 GEMM's rate (on the
CPU, whose GEMMs are fp32, bf16 and fp16 are given the fp32 figure). What no sweep measures (the other
streaming formats, scaled from the base's ratio to ``float``; the inter-node terms; ``overlap``) is
the base's, or the ideal's without one (so is ``fp8_rowwise``: the sweep runs no fp8 GEMM); the YAML's
comments say which.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from itertools import product
from typing import Any, NamedTuple, Sequence

from ..model.sizes import bytes_per
from .calibration import IDEAL, KEYS, STREAMING, Calibration, saturated
from .hardware import Hardware

GRID = (0.0, *(2 ** (i / 2) for i in range(33)))  # s0 of a shape: 0, then 1 .. 65,536 by half octaves
BYTES_GRID = (0.0, *(2 ** (i / 2) for i in range(81)))  # s0 of a transfer: 0, then 1 B .. 1 TiB
COMPUTE_BOUND = 0.5  # a run is compute-bound when its bytes at the fitted streaming rate take at most this of it
SMALLEST = 1e-6  # a fraction is written with a floor: the YAML takes (0, 1]


@dataclass(frozen=True)
class Sweep:
    """What :func:`analysis.verify.calibrate.sweep` measured: median seconds of each run."""

    device: str  # cuda or cpu
    name: str  # the device as its driver (or /proc/cpuinfo) names it
    torch: str  # torch.__version__
    date: str  # ISO date
    dtype: str  # the compute dtype of the GEMMs and attention
    memory: int  # bytes of device memory
    gemm: tuple[tuple[int, int, int, float], ...]  # m, n, k, seconds
    flash: tuple[tuple[int, int, int, float], ...]  # heads (batch x heads), sequence, head size, seconds
    copy: tuple[tuple[int, float], ...]  # bytes copied (read, and as many written), seconds
    elementwise: tuple[int, float]  # bytes of each of a + b = c's tensors, seconds
    kernel_s: float  # a one-element kernel
    vector: tuple[int, int, int, float] | None = None  # an fp32 GEMM (CUDA: the vector peak), m, n, k, seconds
    allreduce: tuple[tuple[int, int, float], ...] = ()  # GPUs, bytes of each GPU's buffer, seconds
    quick: bool = False


class Fitted(NamedTuple):
    hardware: Hardware  # what the YAML says
    notes: dict[str, str]  # YAML key -> where its value comes from
    base: str | None  # the base spec's name


def saturating(points: Sequence[tuple[tuple[float, ...], float]], groups: tuple[int, ...],
               cap: float, grid: tuple[float, ...] = GRID) -> tuple[float, tuple[float, ...]]:
    """``top`` and one ``s0`` per group (``groups[i]``: the group of the i-th size) of
    ``rate = top x prod sizes[i]/(sizes[i] + s0[groups[i]])`` closest to ``points`` (sizes, rate) in
    least squares of the logarithms, ``top <= cap``; of equal fits, the smaller ``s0``."""
    n = max(groups) + 1
    logs = [math.log(rate) for _, rate in points]
    best: tuple[float, float, tuple[float, ...]] | None = None
    for s0 in product(grid, repeat=n):
        rest = [lr - sum(math.log(saturated(s, s0[g])) for s, g in zip(sizes, groups))
                for lr, (sizes, _) in zip(logs, points)]
        top = min(math.exp(sum(rest) / len(rest)), cap)
        error = sum((r - math.log(top)) ** 2 for r in rest)
        if best is None or error < best[0] * (1 - 1e-9):
            best = (error, top, s0)
    assert best is not None
    return best[1], best[2]


def _fraction(x: float) -> float:
    """Three significant digits, in [SMALLEST, 1]."""
    return min(1.0, max(SMALLEST, float(f"{x:.3g}")))


def _size(x: float) -> float:
    return float(round(x))


def _microseconds(seconds: float) -> float:
    """Three significant digits of microseconds, in seconds as the YAML's ``*_us`` keys are read."""
    return float(f"{seconds * 1e6:.3g}") * 1e-6


def _cap(peak: int | None, points: list) -> float:
    """The most a fitted ``top`` may be: the base's peak, or without one twice the best rate measured."""
    return peak if peak is not None else 2 * max(rate for _, rate in points)


def _rounded(x: float) -> int:
    """A measured rate as a spec writes it: four significant digits, whole."""
    return max(1, round(float(f"{x:.4g}")))


def fit(sweep: Sweep, base: Hardware | None) -> Fitted:
    """The hardware spec of the measured machine: ``base``'s peaks and links (the fitted
    rates without one) and the calibration fitted to ``sweep``."""
    k = sweep.kernel_s

    def busy(t: float) -> float:
        return max(t - k, t / 2)

    cal = base.calibration if base is not None else IDEAL
    notes: dict[str, str] = {}
    where = f"the base ({base.name})" if base is not None else "the ideal (no base)"

    copies = [((2.0 * b,), 2 * b / busy(t)) for b, t in sweep.copy]
    stream_top, (b0,) = saturating(copies, (0,), _cap(base.memory_bandwidth if base is not None else None, copies),
                                   BYTES_GRID)
    bandwidth = base.memory_bandwidth if base is not None else _rounded(stream_top)
    stream = _fraction(stream_top / bandwidth)
    notes["streaming_b0"] = notes["streaming.float"] = f"fitted on {len(copies)} copies"

    def memory_s(nbytes: float) -> float:
        return nbytes / (stream_top * saturated(nbytes, b0))

    size, seconds = sweep.elementwise
    elementwise = _fraction(3 * size / busy(seconds) / bandwidth)
    notes["elementwise"] = f"a + b = c of {size:,} bytes each"

    elt = bytes_per(sweep.dtype)
    # (sizes, FLOP/s, bytes moved, busy seconds) of each run
    gemms = [((float(m), float(n), float(kk)), 2.0 * m * n * kk / busy(t), elt * (m * kk + kk * n + m * n), busy(t))
             for m, n, kk, t in sweep.gemm]
    flashes = [((float(s), float(d)), 4.0 * h * s * s * d / busy(t), 4.0 * elt * h * s * d, busy(t))
               for h, s, d, t in sweep.flash]

    def bound(runs: list) -> list:
        """The compute-bound runs (all, when fewer than two are)."""
        kept = [(sizes, rate) for sizes, rate, nbytes, took in runs if memory_s(nbytes) <= COMPUTE_BOUND * took]
        return kept if len(kept) >= 2 else [(sizes, rate) for sizes, rate, _, _ in runs]

    kept = bound(gemms)
    gemm_top, (m0, n0) = saturating(kept, (0, 1, 1), _cap(base.peak(sweep.dtype) if base is not None else None, kept))
    peak = base.peak(sweep.dtype) if base is not None else _rounded(gemm_top)
    notes["gemm"] = notes["gemm_m0"] = notes["gemm_n0"] = \
        f"fitted on {len(kept)} compute-bound {sweep.dtype} GEMMs of {len(gemms)}"
    kept = bound(flashes)
    flash_top, (q0, d0) = saturating(kept, (0, 1), peak)
    notes["flash"] = notes["flash_q0"] = notes["flash_d0"] = \
        f"fitted on {len(kept)} compute-bound {sweep.dtype} scaled_dot_product_attention runs of {len(flashes)}"
    notes["kernel_us"] = "median of a one-element kernel"

    float_base = cal.streaming["float"]
    streaming = {f: stream if f == "float" else _fraction(stream * cal.streaming[f] / float_base) for f in STREAMING}
    for f in STREAMING[1:]:
        notes[f"streaming.{f}"] = f"not measured: float's x {where}'s ratio"

    intra = base.intra_node if base is not None else None
    per_node = base.gpus_per_node if base is not None else None
    latency_intra, bus_intra = cal.latency_intra_s, cal.bus_intra
    if sweep.allreduce:
        gpus = sweep.allreduce[0][0]
        sent = [((2.0 * (g - 1) / g * b,), 2.0 * (g - 1) / g * b / t) for g, b, t in sweep.allreduce]
        bus_top, (s0,) = saturating(sent, (0,), _cap(intra, sent), BYTES_GRID)
        link = intra or _rounded(bus_top)
        intra, per_node = link, per_node or gpus
        fitted_link = f"intra_node: the fitted all-reduce bus rate over {gpus} GPUs"
        notes["interconnect"] = (f"the base's ({base.name}); NCCL measured below"
                                 if base is not None and base.intra_node else fitted_link)
        latency_intra, bus_intra = s0 / bus_top, _fraction(bus_top / link)
        notes["latency_intra_us"] = notes["bus_intra"] = f"fitted on {len(sent)} NCCL all-reduces over {gpus} GPUs"
    else:
        alone = "one GPU visible" if sweep.device == "cuda" else "the CPU"
        notes["latency_intra_us"] = notes["bus_intra"] = f"not measured ({alone}): {where}'s"
        notes["interconnect"] = f"the base's ({base.name}), not measured ({alone})" if base is not None else ""
    for key in ("fp8_rowwise", "latency_inter_us", "bus_inter", "overlap"):
        notes[key] = f"not measured: {where}'s"

    calibration = Calibration(
        gemm=_fraction(gemm_top / peak), gemm_m0=_size(m0), gemm_n0=_size(n0), fp8_rowwise=cal.fp8_rowwise,
        flash=_fraction(flash_top / peak), flash_q0=_size(q0), flash_d0=_size(d0),
        elementwise=elementwise, streaming=streaming, streaming_b0=_size(b0),
        kernel_s=_microseconds(k), latency_intra_s=_microseconds(latency_intra),
        latency_inter_s=cal.latency_inter_s, bus_intra=bus_intra, bus_inter=cal.bus_inter, overlap=cal.overlap,
        source=f"llmcalc hardware calibrate --device {sweep.device}{' --quick' if sweep.quick else ''} on "
               f"{sweep.name}, {sweep.date}, torch {sweep.torch}, {sweep.dtype}")

    if base is not None:
        peaks = dict(base.peak_flops)
        notes["peak_flops"] = notes["memory_bandwidth"] = f"the base's ({base.name})"
    else:
        peaks = {sweep.dtype: peak}
        if sweep.vector is not None:
            m, n, kk, t = sweep.vector
            peaks["fp32"] = _rounded(2 * m * n * kk / busy(t))
        else:  # the CPU: its GEMMs are fp32
            peaks.update({"bf16": peak, "fp16": peak})
        notes["peak_flops"] = (f"the fitted {sweep.dtype} GEMM rate; fp32: an fp32 GEMM's" if sweep.vector is not None
                               else "the fitted fp32 GEMM rate; bf16 and fp16 given the fp32 figure")
        notes["memory_bandwidth"] = "the fitted copy rate (bytes read and written)"
    slug = re.sub(r"[^a-z0-9]+", "-", (base.name if base is not None else sweep.name).lower()).strip("-")[:40]
    hardware = Hardware(
        name=f"{slug or sweep.device}-calibrated",
        description=f"{sweep.name}, measured by llmcalc hardware calibrate on {sweep.date}",
        memory=base.memory if base is not None else sweep.memory, memory_bandwidth=bandwidth, peak_flops=peaks,
        source=base.source if base is not None else f"measured: {sweep.name} ({sweep.device}), no datasheet",
        intra_node=intra, inter_node=base.inter_node if base is not None else None, gpus_per_node=per_node,
        calibration=calibration)
    return Fitted(hardware, notes, base.name if base is not None else None)


def calibration_values(cal: Calibration) -> dict[str, Any]:
    """The ``calibration:`` section's keys (:data:`~analysis.perf.calibration.KEYS`) and values, as the YAML
    writes them."""
    out: dict[str, Any] = {}
    for key, spec in KEYS.items():
        value = getattr(cal, spec.field)
        out[key] = dict(value) if key == "streaming" else value * 1e6 if spec.microseconds else value
    return out


def _number(x: float) -> str:
    """A figure as YAML reads it back: four significant digits, never an exponent; a whole number whole."""
    if float(x).is_integer():
        return str(int(x))
    text = format(Decimal(f"{x:.4g}").normalize(), "f")
    return text.removesuffix(".0") if "." in text else text


def _quantity(value: int, unit: str) -> str:
    """``value`` base units as a datasheet writes them, exactly (``3.35TB/s``)."""
    for prefix, power in (("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0)):
        if value >= 10**power:
            return format(Decimal(value).scaleb(-power).normalize(), "f") + prefix + unit
    return f"{value}{unit}"


def _text(value: str) -> str:
    """A YAML double-quoted scalar."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def hardware_yaml(fitted: Fitted) -> str:
    """The spec as a hardware YAML (``--hardware FILE``), each figure's origin in a comment."""
    hw, notes = fitted.hardware, fitted.notes
    cal = hw.calibration
    lines = ["# Written by `llmcalc hardware calibrate` (docs: Hardware, \"Measuring your GPU\").",
             f"# peaks: {notes['peak_flops']}; bandwidth: {notes['memory_bandwidth']}",
             f"name: {_text(hw.name)}", f"description: {_text(hw.description)}",
             f"memory: \"{_quantity(hw.memory, 'B')}\"",
             f"memory_bandwidth: \"{_quantity(hw.memory_bandwidth, 'B/s')}\"", "peak_flops:"]
    lines += [f"  {d}: \"{_quantity(v, 'OP/s' if d == 'int8' else 'FLOP/s')}\"" for d, v in hw.peak_flops.items()]
    if hw.intra_node or hw.inter_node or hw.gpus_per_node:
        lines.append(f"interconnect:  # {notes['interconnect']}")
        if hw.intra_node:
            lines.append(f"  intra_node: \"{_quantity(hw.intra_node, 'B/s')}\"")
        if hw.inter_node:
            lines.append(f"  inter_node: \"{_quantity(hw.inter_node, 'B/s')}\"")
        if hw.gpus_per_node:
            lines.append(f"  gpus_per_node: {hw.gpus_per_node}")
    lines += [f"source: {_text(hw.source)}", "calibration:"]
    for key, value in calibration_values(cal).items():
        if key == "streaming":
            lines.append("  streaming:")
            lines += [f"    {f}: {_number(v)}  # {notes[f'streaming.{f}']}" for f, v in value.items()]
        else:
            lines.append(f"  {key}: {_number(value)}  # {notes[key]}")
    lines.append(f"  source: {_text(cal.source)}")
    return "\n".join(lines) + "\n"
