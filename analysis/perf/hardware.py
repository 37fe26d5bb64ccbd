"""Accelerator specs: what the roofline of :mod:`analysis.perf.roofline` needs (DESIGN.md section 8).

A spec is a YAML file (bundled ones in ``model_configs/hardware/``, each citing its datasheet; read
by :func:`load_hardware`):

- ``name``, ``description``, ``source`` (the datasheet);
- ``memory``: a size (``80GB`` = 80 * 10^9 bytes, ``80GiB`` = 80 * 2^30);
- ``memory_bandwidth``: a rate (``3.35TB/s``);
- ``peak_flops``: dense peak FLOP/s per dtype (``bf16: 989.4TFLOP/s``; ``fp32`` is the vector,
  non-tensor-core peak that elementwise work runs at; a dtype the chip lacks is left out);
- ``interconnect`` (optional): ``intra_node`` and ``inter_node`` bytes/s per GPU and direction,
  ``gpus_per_node``;
- ``calibration`` (optional): the fractions of these peaks real kernels and collectives reach, for
  the expected time (:mod:`analysis.perf.calibration`); without it, expected is ideal. ``from: NAME``
  in it starts from a bundled accelerator's section, the keys beside it overriding (h200.yaml: ``from:
  h100``, the same GH100 and kernels with this file's peaks, bandwidth and links), so a chip's
  fractions are written once.

Numbers are written as the datasheet prints them, with units, and read exactly (``3.35TB/s`` is
3,350,000,000,000 bytes/s); a plain integer is taken in the base unit (bytes, bytes/s, FLOP/s).
"""

import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from .. import numbers
from ..errors import ConfigError, brief, key_line
from ..load.catalog import HARDWARE_DIR, bundled_files, is_path, read, unknown
from ..load.files import read_text, read_yaml
from .calibration import IDEAL, MAX_QUANTITY, Calibration, calibration_from_dict

PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


class Hardware(NamedTuple):
    name: str
    description: str
    memory: int  # bytes
    memory_bandwidth: int  # bytes/s
    peak_flops: dict[str, int]  # dtype -> dense FLOP/s
    source: str
    intra_node: int | None = None  # bytes/s per GPU and direction
    inter_node: int | None = None
    gpus_per_node: int | None = None
    calibration: Calibration = IDEAL
    file: str | None = None  # the YAML it was read from, and the line of each key: what a later error names
    lines: Mapping[str, int] | None = None

    def at(self, key: str) -> tuple[str | None, str, int | None]:
        """(file, key, line) of ``key`` for a :class:`ConfigError` raised once the spec is in use."""
        return self.file, key, None if self.lines is None else key_line(self.lines, key)

    def peak(self, dtype: str) -> int:
        """Dense FLOP/s in ``dtype`` (no other dtype stands in for a missing one)."""
        if dtype not in self.peak_flops:
            raise ConfigError(f"{self.name} lists no {dtype} peak (it has {', '.join(self.peak_flops)}), which "
                              f"this run needs", *self.at("peak_flops"))
        return self.peak_flops[dtype]

    def ridge(self, dtype: str) -> float:
        """Intensity (FLOPs per byte) where the roof of ``dtype`` turns from bandwidth to compute."""
        return self.peak(dtype) / self.memory_bandwidth

    def attainable(self, dtype: str, intensity: float) -> float:
        """The roofline: FLOP/s reachable at ``intensity``, ``min(peak, intensity x bandwidth)``."""
        return min(self.peak(dtype), intensity * self.memory_bandwidth)


_READ = {"bytes": numbers.size, "rate": numbers.rate, "flops": numbers.flop_rate}


def quantity(value: Any, kind: str, where: tuple[str, str, int | None]) -> int:
    """``'3.35TB/s'`` -> 3_350_000_000_000, exactly (analysis.numbers); ``kind`` is bytes, rate or flops;
    a plain integer is in the base unit."""
    try:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            example = {"bytes": "80GB", "rate": "3.35TB/s", "flops": "989.4TFLOP/s"}[kind]
            unit = {"bytes": "bytes", "rate": "bytes/s", "flops": "FLOP/s"}[kind]
            raise numbers.NumberError(f"expects a number with its unit, such as {example}, or a whole number of "
                                      f"{unit} written without an exponent")  # YAML reads 8.5e10 as a float
        number = value if isinstance(value, int) else _READ[kind](value)
    except numbers.NumberError as exc:
        raise ConfigError(f"{exc}, got {brief(value)}", *where) from None
    if not 0 < number <= MAX_QUANTITY:
        raise ConfigError(f"expected a positive whole number of base units up to 10^21, got {brief(value)}", *where)
    return number


def hardware_from_dict(raw: Any, source: str, lines: dict[str, int] | None = None) -> Hardware:
    lines = lines or {}
    if not isinstance(raw, dict):
        raise ConfigError("a hardware spec is a mapping of keys (name, memory, memory_bandwidth, peak_flops, "
                          "source)", source)
    known = {"name", "description", "memory", "memory_bandwidth", "peak_flops", "interconnect", "calibration",
             "source"}
    for key in raw:
        if key not in known:
            raise ConfigError(f"unknown key (known: {', '.join(sorted(known))})", source, str(key), lines.get(key))
    for key in ("name", "memory", "memory_bandwidth", "peak_flops"):
        if key not in raw:
            raise ConfigError("missing required key", source, key)

    def at(key: str) -> tuple[str, str, int | None]:
        return source, key, key_line(lines, key)

    def text(key: str, default: str = "") -> str:
        value = raw.get(key, default)
        if not isinstance(value, str) or not value.isprintable():
            raise ConfigError(f"expected one line of text, got {brief(value)}", *at(key))
        return value

    peaks = raw["peak_flops"]
    if not isinstance(peaks, dict) or not peaks:
        raise ConfigError(f"expected a mapping dtype -> FLOP/s ({', '.join(PEAK_DTYPES)})", *at("peak_flops"))
    for dtype in peaks:
        if dtype not in PEAK_DTYPES:
            raise ConfigError(f"unknown dtype (known: {', '.join(PEAK_DTYPES)})", *at(f"peak_flops.{dtype}"))
    link, links = raw.get("interconnect", {}), ("intra_node", "inter_node", "gpus_per_node")
    if not isinstance(link, dict):
        raise ConfigError(f"expected a mapping with {', '.join(links)}", *at("interconnect"))
    for key in link:
        if key not in links:
            raise ConfigError(f"unknown key (known: {', '.join(links)})", *at(f"interconnect.{key}"))
    per_node = link.get("gpus_per_node")
    if per_node is not None and (isinstance(per_node, bool) or not isinstance(per_node, int) or not 0 < per_node
                                 <= 2**20):
        raise ConfigError(f"expected a positive integer, got {brief(per_node)}", *at("interconnect.gpus_per_node"))
    return Hardware(
        name=text("name"), description=text("description"),
        memory=quantity(raw["memory"], "bytes", at("memory")),
        memory_bandwidth=quantity(raw["memory_bandwidth"], "rate", at("memory_bandwidth")),
        peak_flops={d: quantity(v, "flops", at(f"peak_flops.{d}")) for d, v in peaks.items()},
        source=text("source"),
        intra_node=None if "intra_node" not in link else quantity(link["intra_node"], "rate",
                                                                  at("interconnect.intra_node")),
        inter_node=None if "inter_node" not in link else quantity(link["inter_node"], "rate",
                                                                  at("interconnect.inter_node")),
        gpus_per_node=per_node,
        calibration=_calibration(raw["calibration"], at) if "calibration" in raw else IDEAL,
        file=source, lines=MappingProxyType(dict(lines)))


def _calibration(value: Any, at: Any) -> Calibration:
    """A ``calibration:`` section; with ``from: NAME``, a bundled accelerator's own section (one without a
    ``from``) under the keys beside it: the same chip's fractions written once."""
    if not isinstance(value, dict) or "from" not in value:
        return calibration_from_dict(value, at)
    name, bundled = value["from"], bundled_hardware()
    if name not in bundled:
        raise ConfigError(f"names no bundled accelerator (known: {', '.join(bundled)}), got {brief(name)}",
                          *at("calibration.from"))
    raw, lines = read(HARDWARE_DIR / f"{name}.yaml")
    own = raw.get("calibration")
    if not isinstance(own, dict) or "from" in own:
        raise ConfigError(f"{name} has no calibration of its own to start from", *at("calibration.from"))
    base = calibration_from_dict(own, lambda key: (f"model_configs/hardware/{name}.yaml", key, key_line(lines, key)))
    rest = {k: v for k, v in value.items() if k != "from"}
    cal = calibration_from_dict(rest, at, base)
    return cal if "source" in rest else cal._replace(source=f"{name}'s: {base.source}")


# torch.cuda.get_device_name -> the bundled spec it is; first match wins. Only names whose
# datasheet figures are the bundled ones (an A100 PCIe 80GB or an H100 NVL is none of them).
DEVICE_NAMES = ((r"H100 PCIe$", "h100-pcie"), (r"H100 80GB HBM3$|H100 SXM", "h100"), (r"H200$", "h200"),
                (r"A100-SXM4-80GB$", "a100-80gb"), (r"A100-SXM4-40GB$", "a100-40gb"), (r"L40S$", "l40s"),
                (r"\bL4$", "l4"), (r"\bA10G$", "a10g"), (r"RTX 4090$", "rtx-4090"), (r"MI300X$", "mi300x"),
                (r"\bB200$", "b200"))


def for_device(device_name: str) -> str | None:
    """The bundled spec of a device, by the name the driver reports (None: not bundled)."""
    return next((spec for pattern, spec in DEVICE_NAMES if re.search(pattern, device_name)), None)


def bundled_hardware() -> list[str]:
    return bundled_files(HARDWARE_DIR)


def load_hardware(spec: str) -> Hardware:
    """A bundled name (``h100``) or a YAML file (a path, as a model's is read: one that exists, or that looks
    like a path)."""
    bundled = bundled_hardware()
    if spec in bundled:
        raw, lines = read(HARDWARE_DIR / f"{spec}.yaml")
        return hardware_from_dict(raw, f"model_configs/hardware/{spec}.yaml", lines)
    if not is_path(spec, (".yaml", ".yml")):
        raise unknown("hardware", spec, bundled, "hardware")
    raw, lines = read_yaml(read_text(Path(spec)), spec)
    return hardware_from_dict(raw, spec, lines)
