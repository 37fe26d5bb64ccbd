"""Expected time: the fractions of the datasheet peaks real kernels reach (DESIGN.md section 11).

A hardware YAML's ``calibration:`` section (each figure's source in the bundled files' comments)
gives a few parameters; the expected time of a component is

    max(matmul FLOPs / (peak x e_mm) + elementwise FLOPs / (vector peak x e_ew),
        bytes / (bandwidth x e_bw)) + kernels x kernel latency

with, for each kernel the component launches (:func:`rates`):

- a GEMM of ``m`` rows (tokens; a mixture of experts: the tokens of one expert), ``n`` outputs
  and ``k`` inputs: ``e_mm = gemm x m/(m + m0) x n/(n + n0) x k/(k + n0)``: small and skinny
  products fill few tiles of the chip and reach far less than large ones; fp8 GEMMs with rowwise
  scales (:mod:`.float8`) ``fp8_rowwise`` of that;
- flash attention over ``q`` query rows a K/V head (positions x the query heads sharing it, packed
  as FlashAttention-3 and FlashDecoding pack them) of head size ``d``:
  ``flash x q/(q + q0) x d/(d + d0)``; eager attention's two products are GEMMs;
- a recurrent mixer's core (its conv, scan or rule and the ops between them, :mod:`analysis.model.mixer`):
  one fused kernel a layer, its FLOPs at ``gemm`` (no published measurement of these kernels among the
  sources) and its bytes streaming as K/V do, in the state's dtype (inference) or the compute dtype;
- elementwise kernels (norms, activations, softmax, the optimizer step): ``elementwise`` of the
  bandwidth and of the vector peak;
- streaming weights and K/V: ``streaming[format] x b/(b + b0)`` of the bandwidth, ``b`` the bytes
  a kernel reads (decode kernels of quantized formats dequantize as they go and reach less);
- a fixed cost per kernel (launch, ramp-up, tail) that no work hides: it is what small-batch
  decode is made of.

Collectives (:func:`collective_s`): ``calls x latency + bytes sent / (link x bus)``, the alpha-beta
model, ``bus`` the fraction of the link NCCL's ring reaches (its bus bandwidth), within a node or
across nodes. ``overlap``: the fraction of the compute a data-parallel collective runs beside that
hides it, as the frameworks schedule it (:mod:`analysis.cluster.step`; the ideal step: all of it).

No ``calibration:`` section: every fraction 1 (data-parallel communication hidden by all the compute
it runs beside, as in the ideal step), no latency (:data:`IDEAL`): expected is ideal.
"""

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from ..count.flops import SCORES_VALUES, absorbed, copies_read, layer_ops, linear_rows, model_ops, run_attentions
from ..count.quant import stored_dtype
from ..count.recompute import rerun_core, rerun_linears, rerun_ops
from ..errors import ConfigError, SpecError, brief
from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.formats import FORMATS, fp8_weights
from ..spec import RunSpec

STREAMING = ("float", "fp8", "int8", "int4", "nf4")  # weight formats by the kernels that read them
MAX_QUANTITY = 10**21  # a zettabyte, a zettaFLOP/s: far past any accelerator (a calibration's sizes too)


class Calibration(NamedTuple):
    gemm: float = 1.0  # fraction of dense peak a large GEMM reaches
    gemm_m0: float = 0.0  # rows at which a GEMM reaches half of it
    gemm_n0: float = 0.0  # columns (and inputs) at which it does
    fp8_rowwise: float = 1.0  # fraction of the fp8 GEMM rate rowwise-scaled GEMMs reach (torchao's rowwise recipe)
    flash: float = 1.0  # fraction of dense peak flash attention reaches on long sequences
    flash_q0: float = 0.0  # query rows a K/V head at which it reaches half of it
    flash_d0: float = 0.0  # head size at which it does
    elementwise: float = 1.0  # fraction of bandwidth and vector peak of elementwise kernels
    streaming: Mapping[str, float] = MappingProxyType(dict.fromkeys(STREAMING, 1.0))  # by kind (streaming_kind)
    streaming_b0: float = 0.0  # bytes a kernel reads at which streaming reaches half its fraction
    kernel_s: float = 0.0  # fixed seconds per kernel
    latency_intra_s: float = 0.0  # seconds per collective call within a node
    latency_inter_s: float = 0.0  # across nodes
    bus_intra: float = 1.0  # fraction of the link bandwidth a collective reaches within a node
    bus_inter: float = 1.0
    overlap: float = 1.0  # fraction of the compute beside it that hides data-parallel communication
    source: str = ""

    def gemm_eff(self, m: float, n: float, k: float) -> float:
        return self.gemm * saturated(m, self.gemm_m0) * saturated(n, self.gemm_n0) * saturated(k, self.gemm_n0)

    def flash_eff(self, rows: float, head_dim: float) -> float:
        return self.flash * saturated(rows, self.flash_q0) * saturated(head_dim, self.flash_d0)

    def streaming_eff(self, fmt: str, nbytes: float) -> float:
        return self.streaming[streaming_kind(fmt)] * saturated(nbytes, self.streaming_b0)


IDEAL = Calibration()


def saturated(x: float, x0: float) -> float:
    """x / (x + x0): half at x0, 1 when x0 is 0 (the saturating form of every size effect)."""
    return x / (x + x0) if x0 else 1.0


def streaming_kind(fmt: str) -> str:
    """The streaming key of a weight or KV dtype or a quantized format."""
    if fmt in ("fp32", "bf16", "fp16"):
        return "float"
    if fmt in FORMATS and FORMATS[fmt].dequantizes:  # bitsandbytes 4-bit: expands the matrix first
        return "nf4"
    if fp8_weights(fmt):
        return "fp8"
    return "int8" if "int8" in fmt else "int4"  # the rest: 4-bit (GPTQ, AWQ, MXFP4, int4)


@dataclass(frozen=True)
class Efficiency:
    """Overrides: a fixed fraction of peak FLOP/s (``compute``) or of bandwidth in place of the
    calibrated ones (None: calibrated). The ideal is always at the peaks."""

    compute: float | None = None
    bandwidth: float | None = None

    def __post_init__(self) -> None:
        for name in ("compute", "bandwidth"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 < value <= 1):
                raise SpecError(f"efficiency.{name}", f"must be in (0, 1], got {value!r}")


CALIBRATED = Efficiency()  # no override


class Rates(NamedTuple):
    """A component's expected matmul FLOP/s, elementwise FLOP/s and bytes/s, and its kernels'
    fixed cost in a pass."""

    matmul: float
    elementwise: float
    bandwidth: float
    latency_s: float


class _Mix:
    """A component's kernels and the FLOP-weighted harmonic mean of their compute efficiencies; ``rerun``
    the kernels per-op checkpointing runs again in backward; ``fmt`` what its streaming reads are stored as
    (None: its weights' dtype); ``inside`` the component whose kernels run it (flash attention's values, in the
    scores' kernel): its bytes are part of that kernel's transfer."""

    def __init__(self) -> None:
        self.flops, self.cost, self.kernels, self.stream, self.rerun = 0.0, 0.0, 0, False, 0
        self.fmt: str | None = None
        self.inside: str | None = None

    def add(self, kernels: int, flops: float = 0.0, eff: float = 1.0, stream: bool = False) -> None:
        self.kernels += kernels
        self.flops += flops
        self.cost += flops / eff if flops else 0.0
        self.stream |= stream

    @property
    def eff(self) -> float | None:
        return self.flops / self.cost if self.cost else None


def _mixes(cal: Calibration, cfg: ModelConfig, run: RunSpec) -> dict[str, _Mix]:
    """Each component's kernels of one forward (``run`` resolved and executed)."""
    out: dict[str, _Mix] = {}

    def mix(key: str) -> _Mix:
        return out.setdefault(key, _Mix())

    flash = run.attention == "flash"
    op_again = run.mode == "train" and run.recompute == "op"  # what per-op checkpointing runs again
    model = build(cfg)
    for group, block in model.blocks:
        n = group.count
        for m in block.linears():
            tokens = linear_rows(m, block, run)
            rows = tokens * m.active
            per_expert = rows / copies_read(m, tokens, run)  # rows a copy's GEMM runs over
            kernels = 2 * n if m.over_keys and absorbed(block, run) else n  # absorbed kv_b: on the query, on the output
            mix(m.key).add(kernels, 2.0 * rows * m.d_in * m.d_out * n, cal.gemm_eff(per_expert, m.d_out, m.d_in), True)
            if run.lora is not None:
                r = run.lora.rank
                mix(m.key + "/lora").add(2 * n, 2.0 * rows * r * (m.d_in + m.d_out) * n,
                                         cal.gemm_eff(per_expert, r, m.d_in), True)
        for attn, spec in run_attentions(block, run):
            packed = run.query_len * max(1, attn.heads // attn.kv_heads)
            if flash:  # one kernel for both products
                eff = cal.flash_eff(packed, attn.score_dim)
                mix("attention/scores").add(n, 1.0, eff, True)
                mix("attention/values").add(0, 1.0, eff, True)
                mix("attention/values").inside = "attention/scores"
            else:
                keys = run.seq if spec.window is None else min(run.seq, spec.window)
                mix("attention/scores").add(n, 1.0, cal.gemm_eff(run.query_len, keys, attn.score_dim), True)
                mix("attention/values").add(n, 1.0, cal.gemm_eff(run.query_len, attn.value_dim, keys), True)
            if run.mode != "train":
                mix("kv_cache").add(n)
        for mixer in block.mixers:  # its core: one fused kernel at the GEMM fraction, streaming its state
            if mixer.core:
                core = mix(mixer.core[0])
                core.add(n, stream=True)
                core.fmt = run.state_dtype if run.mode != "train" else run.dtype
        fused = block.fused()
        ops = layer_ops(block, run)
        for op in ops:  # an op of no traffic of its own (a bias) runs in the matmul's kernel
            if not (flash and op.scores) and op.key not in fused:  # fused into flash's or a core's kernel
                mix(op.key).add(n if op.io else 0)
        if op_again:  # the linears it keeps no output of, eager attention's core, the elementwise ops
            for op in rerun_ops(block, run, ops):
                if not (flash and op.scores) and op.key not in fused and op.io:
                    mix(op.key).rerun += n
            for m in rerun_linears(block, run):
                mix(m.key).rerun += n
            if rerun_core(cfg, run):
                mix("attention/scores").rerun += n
                mix("attention/values").rerun += n
    mix("embedding").add(1)
    if run.logit_tokens:
        head = model.head.linear
        mix(head.key).add(1, 1.0, cal.gemm_eff(run.logit_tokens, head.d_out, head.d_in), True)
    for op in model_ops(cfg, run):
        mix(op.key).add(1 if op.io else 0)
    return out


def rates(cal: Calibration, peaks: tuple[float, float, float], cfg: ModelConfig, run: RunSpec,
          moved: dict[str, int], keys: list[str], eff: Efficiency = CALIBRATED) -> dict[str, Rates]:
    """The expected rates of the components ``keys`` in a pass (``run`` resolved and executed),
    ``peaks`` the matmul and vector FLOP/s and the bandwidth, ``moved`` the bytes by component."""
    mixes = _mixes(cal, cfg, run)
    passes = 1 if run.mode != "train" else 3 + (run.recompute == "full")  # forward, backward's two
    matmul, vector, bandwidth = peaks
    out = {}
    inside: dict[str, int] = {}  # the bytes of what runs in another component's kernels, by that component
    for key, mx in mixes.items():
        if mx.inside is not None:
            inside[mx.inside] = inside.get(mx.inside, 0) + moved.get(key, 0)
    for key in keys:
        mx = mixes.get(key, _Mix())
        kernels = mx.kernels * passes + mx.rerun
        host = mx.inside or key  # the kernels' transfer: the bytes of every component they run
        launched = mixes.get(host, mx)
        per_kernel = (moved.get(host, 0) + inside.get(host, 0)) / max(1, launched.kernels * passes + launched.rerun)
        fmt = mx.fmt or ((run.kv_dtype if run.mode != "train" else run.dtype) if key in SCORES_VALUES
                         else stored_dtype(cfg, key, run.weights_dtype, run.dtype))
        stream = cal.streaming_eff(fmt, per_kernel) if mx.stream else cal.elementwise
        out[key] = Rates(matmul * (eff.compute or mx.eff or cal.gemm), vector * (eff.compute or cal.elementwise),
                         bandwidth * (eff.bandwidth or stream), kernels * cal.kernel_s)
    if "optimizer" in out:  # a fused multi-tensor kernel per layer
        out["optimizer"] = Rates(matmul, vector, bandwidth * (eff.bandwidth or cal.elementwise),
                                 cfg.n_layers * cal.kernel_s)
    return out


class Link(NamedTuple):
    rate: float  # bytes/s per direction
    inside: bool  # within a node


def collective_s(cal: Calibration, calls: int, sent: int, link: Link) -> float:
    """Alpha-beta: each call's latency, then the bytes sent at the bus bandwidth NCCL reaches."""
    alpha, bus = (cal.latency_intra_s, cal.bus_intra) if link.inside else (cal.latency_inter_s, cal.bus_inter)
    return calls * alpha + sent / (link.rate * bus)


class Key(NamedTuple):
    """How a ``calibration:`` key reads: into which :class:`Calibration` field, a fraction in (0, ``top``]
    or (``top`` None) a quantity from 0 to :data:`MAX_QUANTITY`, in microseconds kept as seconds."""

    field: str
    top: float | None
    microseconds: bool = False


# The keys a ``calibration:`` section takes besides ``source`` (a line of text), in the order a written
# one lists them (analysis.perf.fit); ``streaming`` holds a fraction for each of STREAMING.
KEYS = {"gemm": Key("gemm", 1.0), "gemm_m0": Key("gemm_m0", None), "gemm_n0": Key("gemm_n0", None),
        "fp8_rowwise": Key("fp8_rowwise", 1.0), "flash": Key("flash", 1.0), "flash_q0": Key("flash_q0", None),
        "flash_d0": Key("flash_d0", None), "elementwise": Key("elementwise", 1.0),
        "streaming": Key("streaming", 1.0), "streaming_b0": Key("streaming_b0", None),
        "kernel_us": Key("kernel_s", None, True), "latency_intra_us": Key("latency_intra_s", None, True),
        "latency_inter_us": Key("latency_inter_s", None, True), "bus_intra": Key("bus_intra", 1.0),
        "bus_inter": Key("bus_inter", 1.0), "overlap": Key("overlap", 1.0)}


def calibration_from_dict(raw: Any, where: Any, base: Calibration = IDEAL) -> Calibration:
    """The ``calibration:`` section, its keys over ``base``'s; ``where(key)`` gives (file, key, line) for an
    error."""
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of efficiency parameters", *where("calibration"))
    known = {*KEYS, "source"}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"calibration.{key}"
        if key not in known:
            raise ConfigError(f"unknown key (known: {', '.join(sorted(known))})", *where(name))
        if key == "source":
            if not isinstance(value, str) or not value.isprintable():
                raise ConfigError(f"expected one line of text, got {brief(value)}", *where(name))
            values["source"] = value
        elif key == "streaming":  # all five, or over a bundled section (``from``) the kinds to change
            whole = base is IDEAL
            if not isinstance(value, dict) or not value:
                raise ConfigError(f"expected a fraction for {'each' if whole else 'some'} of {', '.join(STREAMING)}",
                                  *where(name))
            for kind in value:
                if kind not in STREAMING:
                    raise ConfigError(f"unknown kind (known: {', '.join(STREAMING)})", *where(f"{name}.{kind}"))
            missing = [kind for kind in STREAMING if kind not in value]
            if whole and missing:
                raise ConfigError(f"expected a fraction for each of {', '.join(STREAMING)}: {', '.join(missing)} "
                                  "missing", *where(name))
            values["streaming"] = {**base.streaming, **{k: _number(v, f"{name}.{k}", where, 1.0)
                                                        for k, v in value.items()}}
        else:
            spec = KEYS[key]
            number = _number(value, name, where, spec.top)
            values[spec.field] = number * 1e-6 if spec.microseconds else number
    return base._replace(**values)


def _number(value: Any, key: str, where: Any, top: float | None) -> float:
    """A positive number, at most ``top`` (a fraction) when given; sizes may be 0."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and (
        0 < value <= top if top is not None else 0 <= value <= MAX_QUANTITY)
    if not ok:
        want = "a fraction in (0, 1]" if top is not None else "a number from 0 to 10^21"
        raise ConfigError(f"expected {want}, got {brief(value)}", *where(key))
    return float(value)
