"""`llmcalc hardware calibrate`: measure this machine and write a hardware YAML with the fitted
calibration. The sweep (torch) is :mod:`analysis.verify.calibrate`, imported once the command line
is known to be good; the fit and the YAML are :mod:`analysis.perf.fit`."""

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from ..analysis.load.files import read_yaml
from ..analysis.perf.fit import Fitted, Sweep, calibration_values, fit, hardware_yaml
from ..analysis.perf.hardware import for_device, hardware_from_dict, load_hardware
from ..analysis.verify import cuda_device, torch_problem
from .errors import UsageError
from .format import si
from .options import Format, Json, hardware_option, out_file, output_format
from .report import Col, Report, Table, emit, text_col
from .terminal import warn

CALIBRATE_DEVICES = ("cuda", "cpu")
SUFFIXES = (".yaml", ".yml")


def _value(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.4g}"


def _report(sweep: Sweep, fitted: Fitted, out: Path) -> Report:
    hw = fitted.hardware
    values = calibration_values(hw.calibration)
    rows = [("memory_bandwidth", si(hw.memory_bandwidth, "B/s"), fitted.notes["memory_bandwidth"]),
            *((f"peak_flops.{d}", si(v, "FLOP/s"), fitted.notes["peak_flops"]) for d, v in hw.peak_flops.items())]
    for key, value in values.items():
        if key == "streaming":
            rows += [(f"streaming.{f}", _value(v), fitted.notes[f"streaming.{f}"]) for f, v in value.items()]
        else:
            rows.append((key, _value(value), fitted.notes[key]))
    table = Table([text_col("key", key=True), Col("value"), text_col("from", optional=True)], [rows],
                  f"{hw.name}: {sweep.name}, torch {sweep.torch}, {sweep.dtype} (written to {out})")
    data = {"name": hw.name, "device": sweep.device, "device_name": sweep.name, "torch": sweep.torch,
            "date": sweep.date, "dtype": sweep.dtype, "quick": sweep.quick, "base": fitted.base, "out": str(out),
            "memory_bandwidth": hw.memory_bandwidth, "peak_flops": hw.peak_flops, "calibration": values,
            "notes": fitted.notes,
            "measured": {"kernel_s": sweep.kernel_s,
                         "gemm": [{"m": m, "n": n, "k": k, "seconds": t} for m, n, k, t in sweep.gemm],
                         "flash": [{"heads": h, "seq": s, "head_dim": d, "seconds": t} for h, s, d, t in sweep.flash],
                         "copy": [{"bytes": b, "seconds": t} for b, t in sweep.copy],
                         "elementwise": {"bytes": sweep.elementwise[0], "seconds": sweep.elementwise[1]},
                         "allreduce": [{"gpus": g, "bytes": b, "seconds": t} for g, b, t in sweep.allreduce]}}
    csv = [{"key": key, "value": value, "from": note} for key, value, note in rows]
    return Report(data, csv, [table])


def calibrate(
    device: Annotated[Literal[CALIBRATE_DEVICES], typer.Option(
        "--device", help="cuda: the first CUDA device (NCCL all-reduce too when several are visible). cpu: the same "
        "sweep at tiny sizes, one thread, a few seconds (how the tests run the code path).")] = "cuda",
    hardware_spec: Annotated[Optional[str], hardware_option(
        "The base: its peaks, links and what the sweep does not measure are kept. Default on cuda: the bundled spec "
        "of the device; without one, the peaks are the fitted rates.")] = None,
    out: Annotated[Optional[str], typer.Option(
        "--out", metavar="FILE", help="Write the hardware YAML here (FILE.yaml) and print what was fitted; without "
        "it the YAML is printed.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer shapes and runs.")] = False,
    fmt: Format = "table",
    json_out: Json = False,
) -> None:
    """Measure this machine (GEMMs, flash attention, a bandwidth copy, a kernel's fixed cost, NCCL all-reduce) and
    write a hardware YAML with the calibration fitted to it, for `time` and `plan` to use (--hardware FILE).

    Examples:
      llmcalc hardware calibrate --device cuda --out my-gpu.yaml
      llmcalc time llama-3.1-8b --hardware my-gpu.yaml --mode decode
    """
    fmt = output_format(fmt, json_out)
    path = None if out is None else out_file(out, SUFFIXES, "YAML file", "my-gpu.yaml", " (what --hardware reads)")
    if path is None and fmt != "table":
        warn(f"--format {fmt} applies to the report printed with --out; without it the YAML is printed")
    base = None if hardware_spec is None else load_hardware(hardware_spec)
    dtype = "bf16" if device == "cuda" else "fp32"
    if base is not None:
        base.peak(dtype)  # the dtype the GEMMs run in has a peak to be a fraction of
    problem = torch_problem()
    if problem:
        raise UsageError(f"hardware calibrate: {problem}")
    if device == "cuda":
        name = cuda_device()
        if name is None:
            raise UsageError("no CUDA device: torch sees none (torch.cuda.is_available() is False); --device cpu runs "
                             "the sweep at tiny sizes")
        if base is None and for_device(name) is not None:
            base = load_hardware(for_device(name) or "")
        elif base is None:
            warn(f"{name!r} is not a bundled accelerator: the peaks written are the fitted rates (give "
                 "--hardware FILE with its datasheet's)")
    from ..analysis.verify.calibrate import sweep as measure  # imports torch

    sweep = measure(device, quick)
    fitted = fit(sweep, base)
    text = hardware_yaml(fitted)
    raw, lines = read_yaml(text, "the written YAML")
    hardware_from_dict(raw, "the written YAML", lines)  # what --hardware will read
    if path is None:
        sys.stdout.write(text)
        return
    path.write_text(text)
    emit(_report(sweep, fitted, path), fmt)
