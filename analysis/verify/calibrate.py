"""`llmcalc hardware calibrate`'s sweep: short timed runs of the kernels the expected model's terms
describe, on a CUDA device or the CPU (:mod:`analysis.perf.fit` fits the terms to them).

- GEMMs (``torch.mm``) over a few (m, n, k) shapes in the compute dtype: bf16 on CUDA, fp32 on the CPU;
  on CUDA also one fp32 GEMM (TF32 off: the vector peak);
- flash attention (``F.scaled_dot_product_attention``, no mask) over a few sequence lengths and head
  sizes;
- a copy over a few sizes (bandwidth), an ``a + b = c`` of the largest (elementwise kernels);
- a one-element kernel: the fixed cost of a kernel;
- NCCL all-reduce over every visible CUDA device (``torch.cuda.nccl``, one process) when there are
  several.

Each run is repeated after a warm-up and the median kept (:func:`analysis.verify.timed.median_seconds`:
CUDA events on CUDA, ``time.perf_counter`` on the CPU; the all-reduce, on several devices, by the
wall clock between synchronizations). On the CPU the sizes are tiny and the runs on one thread (the
sweep takes about a second):
the code path is what the tests and CI exercise, not a calibration anyone should plan with.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import time
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..perf.fit import Sweep
from .timed import median_seconds


class Sizes(NamedTuple):
    gemm: tuple[tuple[int, int, int], ...]  # m, n, k
    flash: tuple[tuple[int, int, int], ...]  # heads (batch x heads), sequence, head size
    copy: tuple[int, ...]  # bytes
    elementwise: int  # bytes of each tensor
    vector: tuple[int, int, int] | None  # an fp32 GEMM's m, n, k (CUDA)
    allreduce: tuple[int, ...]  # bytes of each GPU's buffer
    warmup: int
    runs: int


SIZES = {
    ("cuda", False): Sizes(
        gemm=(*((m, d, d) for m in (64, 256, 1024, 4096, 16384) for d in (1024, 4096, 8192)),
              *((8192, n, 8192) for n in (128, 512, 2048)), *((8192, 8192, k) for k in (128, 512, 2048))),
        flash=tuple((64, s, d) for s in (256, 1024, 4096, 16384) for d in (64, 128)),
        copy=tuple(2**p for p in (20, 22, 24, 26, 28, 30)), elementwise=2**28, vector=(4096, 4096, 4096),
        allreduce=tuple(2**p for p in (16, 20, 24, 28)), warmup=3, runs=10),
    ("cuda", True): Sizes(
        gemm=((256, 1024, 1024), (256, 8192, 8192), (4096, 1024, 1024), (4096, 8192, 8192), (8192, 256, 8192)),
        flash=tuple((64, s, d) for s in (512, 4096) for d in (64, 128)),
        copy=(2**20, 2**24, 2**28), elementwise=2**26, vector=(2048, 2048, 2048),
        allreduce=(2**20, 2**26), warmup=2, runs=5),
    ("cpu", False): Sizes(
        gemm=(*((m, d, d) for m in (1, 8, 64, 256) for d in (64, 256)), (256, 32, 256), (256, 256, 32)),
        flash=tuple((4, s, d) for s in (64, 256) for d in (32, 64)),
        copy=(2**14, 2**17, 2**20, 2**23), elementwise=2**22, vector=None, allreduce=(), warmup=2, runs=5),
    ("cpu", True): Sizes(
        gemm=tuple((m, d, d) for m in (4, 64) for d in (64, 128)),
        flash=tuple((2, s, d) for s in (32, 128) for d in (32, 64)),
        copy=(2**14, 2**18, 2**21), elementwise=2**20, vector=None, allreduce=(), warmup=1, runs=3),
}
DTYPES = {"cuda": ("bf16", torch.bfloat16), "cpu": ("fp32", torch.float32)}
TINY_RUNS = 20  # of the one-element kernel


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what the platform says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _cpu_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows): a size that says nothing
        return 2**30


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text).strip() or "unknown"


def _gemm(m: int, n: int, k: int, dtype: torch.dtype, device: str, sizes: Sizes) -> float:
    a, b = torch.randn(m, k, dtype=dtype, device=device), torch.randn(k, n, dtype=dtype, device=device)
    c = torch.empty(m, n, dtype=dtype, device=device)
    return median_seconds(lambda: torch.mm(a, b, out=c), device, sizes.warmup, sizes.runs)


def _flash(heads: int, seq: int, head_dim: int, dtype: torch.dtype, device: str, sizes: Sizes) -> float:
    q, k, v = (torch.randn(1, heads, seq, head_dim, dtype=dtype, device=device) for _ in range(3))
    return median_seconds(lambda: F.scaled_dot_product_attention(q, k, v), device, sizes.warmup, sizes.runs)


def _copy(nbytes: int, device: str, sizes: Sizes) -> float:
    src, dst = torch.ones(nbytes, dtype=torch.uint8, device=device), torch.empty(nbytes, dtype=torch.uint8,
                                                                                   device=device)
    return median_seconds(lambda: dst.copy_(src), device, sizes.warmup, sizes.runs)


def _add(nbytes: int, dtype: torch.dtype, device: str, sizes: Sizes) -> float:
    n = nbytes // torch.finfo(dtype).bits * 8
    a, b, c = (torch.ones(n, dtype=dtype, device=device) for _ in range(3))
    return median_seconds(lambda: torch.add(a, b, out=c), device, sizes.warmup, sizes.runs)


def _tiny(device: str, sizes: Sizes) -> float:
    x = torch.zeros(1, device=device)
    return median_seconds(lambda: x.add_(1.0), device, sizes.warmup, TINY_RUNS)


def _allreduce(sizes: Sizes) -> tuple[tuple[int, int, float], ...]:
    """NCCL all-reduce of fp32 buffers, one on each visible device, timed by the wall clock between
    synchronizations of all of them."""
    import torch.cuda.nccl as nccl

    gpus = torch.cuda.device_count()

    def synchronize() -> None:
        for i in range(gpus):
            torch.cuda.synchronize(i)

    out = []
    for nbytes in sizes.allreduce:
        buffers = [torch.ones(nbytes // 4, dtype=torch.float32, device=f"cuda:{i}") for i in range(gpus)]
        for _ in range(sizes.warmup):
            nccl.all_reduce(buffers)
        synchronize()
        times = []
        for _ in range(sizes.runs):
            start = time.perf_counter()
            nccl.all_reduce(buffers)
            synchronize()
            times.append(time.perf_counter() - start)
        out.append((gpus, nbytes, statistics.median(times)))
        del buffers
    return tuple(out)


def sweep(device: str, quick: bool = False) -> Sweep:
    """Time the sweep on ``device`` (cuda: the first CUDA device; cpu) at its sizes (``quick``: fewer)."""
    sizes = SIZES[device, quick]
    dtype_name, dtype = DTYPES[device]
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    if device == "cpu":  # one core: a pool of threads on a shared machine waits on its slowest (10 ms stalls)
        torch.set_num_threads(1)
    try:
        return _sweep(device, quick, sizes, dtype_name, dtype)
    finally:
        torch.set_num_threads(threads)


def _sweep(device: str, quick: bool, sizes: Sizes, dtype_name: str, dtype: torch.dtype) -> Sweep:
    with torch.inference_mode():
        if device == "cuda":
            torch.cuda.set_device(0)
            name, memory = torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory
        else:
            name, memory = cpu_name(), _cpu_memory()
        kernel_s = _tiny(device, sizes)
        gemm = tuple((m, n, k, _gemm(m, n, k, dtype, device, sizes)) for m, n, k in sizes.gemm)
        vector = None
        if sizes.vector is not None:
            tf32 = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 (vector) units, not the tensor cores
            try:
                vector = (*sizes.vector, _gemm(*sizes.vector, torch.float32, device, sizes))
            finally:
                torch.backends.cuda.matmul.allow_tf32 = tf32
        flash = tuple((h, s, d, _flash(h, s, d, dtype, device, sizes)) for h, s, d in sizes.flash)
        copy = tuple((b, _copy(b, device, sizes)) for b in sizes.copy)
        elementwise = (sizes.elementwise, _add(sizes.elementwise, dtype, device, sizes))
        allreduce = _allreduce(sizes) if device == "cuda" and torch.cuda.device_count() > 1 else ()
    if device == "cuda":
        torch.cuda.empty_cache()
    return Sweep(device=device, name=_printable(name), torch=torch.__version__,
                 date=datetime.date.today().isoformat(), dtype=dtype_name, memory=memory, gemm=gemm, flash=flash,
                 copy=copy, elementwise=elementwise, kernel_s=kernel_s, vector=vector, allreduce=allreduce,
                 quick=quick)
