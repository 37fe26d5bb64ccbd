"""`llmcalc hardware calibrate`: the fit recovers the parameters of timings made from them, the YAML it
writes is read back by --hardware, and the whole path runs on the CPU (torch, tiny sizes)."""

import json

import pytest

from llmcalc.analysis.perf.calibration import STREAMING
from llmcalc.analysis.perf.fit import Sweep, fit, hardware_yaml
from llmcalc.analysis.perf.hardware import load_hardware

PEAK, BANDWIDTH = 10**12, 10**11  # FLOP/s, bytes/s of the made-up machine


def _sat(x: float, x0: float) -> float:
    return x / (x + x0)


def _sweep(kernel: float = 0.0, **changes) -> Sweep:
    """Timings made from gemm 0.8 (m0 64, n0 128), flash 0.6 (q0 128, d0 16), streaming 0.9
    (b0 1 MiB), ``kernel`` seconds of launch cost on each kernel, and an all-reduce over 8 GPUs at
    4e11 B/s with s0 4 MiB."""
    gemm = tuple((m, n, k, kernel + 2 * m * n * k / (PEAK * 0.8 * _sat(m, 64) * _sat(n, 128) * _sat(k, 128)))
                 for m in (256, 1024, 4096) for n, k in ((1024, 1024), (4096, 4096), (4096, 512), (512, 4096)))
    flash = tuple((16, s, d, kernel + 4 * 16 * s * s * d / (PEAK * 0.6 * _sat(s, 128) * _sat(d, 16)))
                  for s in (512, 2048, 8192) for d in (64, 128))
    copy = tuple((b, kernel + 2 * b / (BANDWIDTH * 0.9 * _sat(2 * b, 2**20))) for b in (2**18, 2**22, 2**26, 2**30))
    sent = 2 * 7 / 8
    allreduce = tuple((8, b, (sent * b + 2**22) / 4e11) for b in (2**20, 2**24, 2**28))
    values = dict(device="cuda", name="Made-up GPU", torch="2.13.0", date="2026-01-01", dtype="bf16",
                  memory=80 * 10**9, gemm=gemm, flash=flash, copy=copy,
                  elementwise=(2**28, kernel + 3 * 2**28 / 7e10), kernel_s=kernel,
                  vector=(4096, 4096, 4096, kernel + 2 * 4096**3 / 5e10), allreduce=allreduce)
    return Sweep(**{**values, **changes})


@pytest.mark.unit
def test_the_fit_recovers_the_parameters_the_timings_were_made_from():
    hw = fit(_sweep(), None).hardware
    cal = hw.calibration
    # no base: the peaks are the fitted rates, the fractions 1 (flash: of the GEMM's), the fp32 peak an fp32 GEMM's
    assert (hw.peak_flops["bf16"], hw.memory_bandwidth, hw.peak_flops["fp32"]) == (0.8 * PEAK, 0.9 * BANDWIDTH,
                                                                                   5 * 10**10)
    assert (cal.gemm, cal.flash, cal.streaming["float"]) == (1.0, 0.75, 1.0)
    assert (cal.gemm_m0, cal.gemm_n0, cal.flash_q0, cal.flash_d0, cal.streaming_b0) == (64, 128, 128, 16, 2**20)
    # s0 / bus rate, written as the YAML's microseconds to three significant digits: 10.5 us
    assert cal.latency_intra_s == float(f"{2**22 / 4e11 * 1e6:.3g}") * 1e-6 and hw.intra_node == 4 * 10**11
    assert (cal.bus_intra, hw.gpus_per_node, cal.overlap, cal.kernel_s) == (1.0, 8, 1.0, 0.0)


@pytest.mark.unit
def test_a_base_keeps_its_peaks_links_and_what_is_not_measured():
    h100 = load_hardware("h100")
    fitted = fit(_sweep(2e-6, allreduce=()), h100)
    hw, cal = fitted.hardware, fitted.hardware.calibration
    assert (hw.peak_flops, hw.memory_bandwidth, hw.memory) == (h100.peak_flops, h100.memory_bandwidth, h100.memory)
    assert (hw.intra_node, hw.inter_node, hw.gpus_per_node) == (h100.intra_node, h100.inter_node, 8)
    base = h100.calibration
    assert (cal.latency_intra_s, cal.bus_intra, cal.latency_inter_s, cal.bus_inter, cal.overlap) == (
        base.latency_intra_s, base.bus_intra, base.latency_inter_s, base.bus_inter, base.overlap)
    # the fractions of the base's peaks, to three significant digits: 0.8 TFLOP/s of 989.4, 0.6 of them in
    # flash attention, 90 GB/s of 3.35 TB/s
    assert cal.kernel_s == 2e-6 and (cal.gemm, cal.flash, cal.streaming["float"]) == (0.000809, 0.000606, 0.0269)
    assert (cal.gemm_m0, cal.gemm_n0, cal.flash_q0, cal.flash_d0, cal.streaming_b0) == (64, 128, 128, 16, 2**20)
    for f in STREAMING[1:]:  # the base's ratio to float, to three significant digits
        assert cal.streaming[f] == float(f"{0.0269 * base.streaming[f] / base.streaming['float']:.3g}")
    assert fitted.notes["bus_intra"] == "not measured (one GPU visible): the base (h100)'s"
    assert hw.name == "h100-calibrated" and "torch 2.13.0" in cal.source


@pytest.mark.unit
@pytest.mark.parametrize("base", [None, "h100", "l4"])
def test_the_yaml_is_read_back_as_written(tmp_path, base):
    fitted = fit(_sweep(allreduce=() if base == "l4" else _sweep().allreduce, kernel_s=3.1e-6),
                 None if base is None else load_hardware(base))
    path = tmp_path / "my-gpu.yaml"
    path.write_text(hardware_yaml(fitted))
    read = load_hardware(str(path))
    where = {"file": None, "lines": None}  # where each was read from, not what it says
    assert read._replace(calibration=None, **where) == fitted.hardware._replace(calibration=None, **where)
    assert read.calibration == fitted.hardware.calibration


@pytest.mark.unit
def test_a_cpu_sweep_gives_bf16_the_fp32_figure():
    hw = fit(_sweep(device="cpu", dtype="fp32", vector=None, allreduce=()), None).hardware
    assert hw.peak_flops["bf16"] == hw.peak_flops["fp16"] == hw.peak_flops["fp32"]
    assert (hw.intra_node, hw.gpus_per_node) == (None, None)


@pytest.mark.unit
def test_hardware_lists_and_calibrate_is_its_sub_command(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert run("hardware", "--json").exit_code == 0
    assert "calibrate" in run("hardware", "--help").stdout
    assert "cuda|cpu" in run("hardware", "calibrate", "--help").stdout


@pytest.mark.reference
def test_calibrate_on_the_cpu_writes_a_spec_time_reads(run, tmp_path):
    """The whole path at tiny sizes: sweep, fit, YAML, then `time` with its expected figure."""
    path = tmp_path / "tmp.yaml"
    result = run("hardware", "calibrate", "--device", "cpu", "--quick", "--out", path, "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["device"], report["dtype"], report["out"]) == ("cpu", "fp32", str(path))
    hw = load_hardware(str(path))
    assert hw.calibration.kernel_s > 0 and "--device cpu --quick" in hw.calibration.source
    timed = run("time", "gpt2-small", "--hardware", path, "--json")
    assert timed.exit_code == 0, timed.stderr
    data = json.loads(timed.stdout)
    expected = data["expected"]
    assert expected["calibration"] == hw.calibration.source
    assert expected["time_s"] > 0 and expected["time_s"] != data["time_s"]
    shown = run("hardware", "calibrate", "--device", "cpu", "--quick")  # no --out: the YAML on stdout
    assert shown.exit_code == 0 and shown.stdout.startswith("# Written by `llmcalc hardware calibrate`")

