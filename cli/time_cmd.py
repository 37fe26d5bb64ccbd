"""`llmcalc time`: how long a pass takes on an accelerator, component by component: expected
(calibrated) and ideal (the roofline at peak, a bound); `llmcalc hardware`: the bundled accelerators."""

import dataclasses
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from ..analysis.cluster.memory import generation_memory, memory
from ..analysis.count.flops import mla_absorbed
from ..analysis.model.config import ModelConfig
from ..analysis.perf.calibration import IDEAL, Efficiency
from ..analysis.perf.float8 import serving
from ..analysis.perf.hardware import PEAK_DTYPES, Hardware, bundled_hardware, load_hardware
from ..analysis.perf.roofline import Roofline, generate, prefill, roofline, utilization
from ..analysis.spec import MODES, Layout, RunSpec, runs
from .common import (
    MOE_TRAINING,
    dtypes_tag,
    expected_head,
    lora_models,
    lora_record,
    lora_spec,
    lora_tag,
    one_or_list,
    splittable,
    warn_idle,
    workloads,
)
from .errors import UsageError
from .format import count, iec, rate, seconds, si
from .options import (
    ONE,
    WORKLOAD,
    AllLogits,
    AsyncTp,
    Attention,
    BandwidthEfficiency,
    Chunk,
    ComputeEfficiency,
    Counts,
    Cp,
    Dp,
    Dtype,
    Ep,
    Format,
    Fp8Scaling,
    GlobalBatch,
    Gpus,
    GradDtype,
    Images,
    ImageSize,
    Json,
    KvDtype,
    LoraAlpha,
    LoraRank,
    LoraTargets,
    MicroBatches,
    Models,
    Optimizer,
    Pp,
    Recompute,
    Sp,
    StateDtype,
    Tp,
    Vpp,
    WeightsDtype,
    Zero,
    amount,
    applicable,
    hardware_option,
    output_format,
    seqs_option,
    whole,
)
from .report import Col, Report, Table, emit, pick, text_col
from .terminal import warn

if TYPE_CHECKING:  # the cluster model is imported by the runs that use it: one GPU starts faster without it
    from ..analysis.cluster.generation import ParallelGeneration
    from ..analysis.cluster.step import Step

TIME_MODES = (*MODES, "generate")  # generate: a prefill of --prompt tokens, then --new decode steps


def hardware(fmt: Format = "table", json_out: Json = False) -> None:
    """The bundled accelerators: memory, bandwidth and dense peak FLOP/s, each from its datasheet.
    Your own: a YAML file with the same keys (docs: Hardware), passed to --hardware; `llmcalc hardware calibrate`
    measures yours and writes one.

    Examples:
      llmcalc hardware
      llmcalc hardware --json
      llmcalc hardware calibrate --device cuda --out my-gpu.yaml
    """
    fmt = output_format(fmt, json_out)
    specs = [load_hardware(name) for name in bundled_hardware()]
    data = [hardware_json(h) for h in specs]
    rows = [(h.name, iec(h.memory) if h.memory % 10**9 else f"{h.memory // 10**9} GB",
             si(h.memory_bandwidth, "B/s"), *(si(h.peak_flops[d], "FLOP/s") if d in h.peak_flops else "-"
                                               for d in ("bf16", "fp8")),
             "-" if d["calibration"] is None else "yes", h.description) for h, d in zip(specs, data)]
    table = Table([text_col("name", key=True), Col("memory"), Col("bandwidth"), Col("bf16 dense"),
                   Col("fp8 dense"), text_col("calibrated"), text_col("description", optional=True)], [rows],
                  "accelerators (sources: `llmcalc hardware --json`, or the YAML files)")
    columns = ("name", "description", "memory", "memory_bandwidth", *(f"peak_flops.{k}" for k in PEAK_DTYPES),
               *(f"interconnect.{k}" for k in ("intra_node", "inter_node", "gpus_per_node")), "calibration", "source")
    csv = [{**dict.fromkeys(columns), **pick(d, *columns)} for d in data]  # every column, in this order
    emit(Report(data, csv, [table, "calibrated: the expected time has its fractions of these peaks (docs: Hardware, "
                                   "Calibration); -: none, expected = ideal"]), fmt)


def hardware_json(h: Hardware) -> dict:
    return {"name": h.name, "description": h.description, "memory": h.memory, "memory_bandwidth": h.memory_bandwidth,
            "peak_flops": h.peak_flops, "interconnect": {"intra_node": h.intra_node, "inter_node": h.inter_node,
                                                         "gpus_per_node": h.gpus_per_node},
            "calibration": h.calibration.source if h.calibration != IDEAL else None, "source": h.source}


def _components(r: Roofline) -> dict:
    """Each component: the ideal's keys, and the expected time beside them."""
    return {k: {"flops": c.flops, "matmul_flops": c.matmul_flops, "elementwise_flops": c.elementwise_flops,
                "bytes": c.bytes, "intensity": c.intensity, "compute_s": c.compute_s,
                "memory_s": c.memory_s, "time_s": c.time_s, "bound": c.bound, "expected_s": c.expected_s,
                "expected_compute_s": c.expected_compute_s, "expected_memory_s": c.expected_memory_s,
                "latency_s": c.latency_s, "expected_bound": c.expected_bound} for k, c in r.components.items()}


IDEAL_EFFICIENCY = {"mfu": 1.0, "bandwidth": 1.0}  # the ideal's, as the JSON has always said: the peaks


def time_json(cfg: ModelConfig, hw: Hardware, mode: str, r: Roofline, eff: Efficiency) -> dict:
    run = r.run
    return {"model": cfg.name, "hardware": hw.name, "mode": mode, "seq_len": run.seq, "batch": run.batch,
            "attention": run.attention, "dtype": run.dtype, "matmul_dtype": run.matmul_dtype,
            "fp8_scaling": run.fp8_scaling, "weights_dtype": run.weights_dtype, "kv_dtype": run.kv_dtype,
            "state_dtype": run.state_dtype, "grad_dtype": run.grad_dtype, "chunk": run.chunk,
            "all_logits": run.all_logits, "recompute": run.recompute, "efficiency": IDEAL_EFFICIENCY,
            "time_s": r.time_s, "flops": r.flops, "bytes": r.bytes, "bound": r.bound, "components": _components(r),
            "expected": {**expected_head(hw, eff), "time_s": r.expected_s, "bound": r.expected_bound},
            **({"lora": lora_record(cfg, run.lora)} if run.lora else {})}


def _breakdown(cfg: ModelConfig, hw: Hardware, rec: dict, r: Roofline) -> Report:
    total = r.expected_s
    rows = [(key, si(c.flops, "FLOP"), iec(c.bytes), "-" if c.intensity is None else f"{c.intensity:,.1f}",
             seconds(c.expected_s), c.expected_bound, f"{100 * c.expected_s / total:.1f}%" if total else "-",
             seconds(c.time_s), c.bound)
            for key, c in sorted(r.components.items(), key=lambda kc: -kc[1].expected_s)]
    run = r.run
    what = (f"prefill of {count(run.seq)} tokens (time to first token)" if rec["mode"] == "generate"
            else f"{rec['mode']}, seq {count(run.seq)}")
    gpus = f"{rec['gpus']:,} x " if "gpus" in rec else ""
    title = (f"{cfg.name} on {gpus}{hw.name}: {what}, batch {count(run.batch)}, {dtypes_tag(run)}, {run.attention} "
             "attention" + (", MLA absorbed" if mla_absorbed(cfg, run) else "")
             + (f", {Layout(**rec['layout']).describe()}: one GPU's FLOPs and bytes" if gpus else "")
             + (f", chunks of {count(run.chunk)}" if run.chunk else "") + lora_tag(rec.get("lora")))
    table = Table([text_col("component", key=True), Col("FLOPs"), Col("bytes"), Col("FLOP/B"), Col("expected"),
                   text_col("bound"), Col("share"), Col("ideal"), text_col("ideal bound")], [rows], title,
                  footer=["total", si(r.flops, "FLOP"), iec(r.bytes), f"{r.intensity:,.1f}",
                          seconds(total), r.expected_bound, "100.0%", seconds(r.time_s), r.bound])
    blocks: list = [table, *_notes(cfg, hw, rec, r.run)]
    csv = [{**pick(rec, "model", "hardware", "mode", "seq_len", "batch", "memory_bytes"), **_generation_csv(rec),
            "component": k,
            **{f: v for f, v in c.items() if f != "intensity"}} for k, c in rec["components"].items()]
    return Report(rec, csv, blocks)


GENERATION = ("ttft_s", "tpot_s", "tokens_per_s", "total_s", "no_cache_total_s")  # a generation's figures


def _generation_csv(rec: dict) -> dict:
    """A generation's CSV columns: its prompt and new tokens, its figures (ideal) and their expected ones."""
    if rec["mode"] != "generate":
        return {}
    return {**pick(rec, "prompt", "new", *GENERATION), **{f"expected.{k}": rec["expected"][k] for k in GENERATION}}


def _replicas(rec: dict) -> str:
    """A generation's data-parallel GPUs, each with its own batch ("" without)."""
    dp = rec["layout"]["dp"] if "layout" in rec else 1
    return f" on each of {count(dp)} data-parallel GPUs" if dp > 1 else ""


def _notes(cfg: ModelConfig, hw: Hardware, rec: dict, run: RunSpec) -> list[str]:
    eff, exp = rec["expected"]["efficiency"], rec["expected"]
    overrides = [f"{v:g} of {what}" for v, what in ((eff["compute"], "peak FLOP/s"), (eff["bandwidth"], "bandwidth"))
                 if v is not None]
    how = (f"every kernel at {' and '.join(overrides)} (overrides), the rest calibrated" if overrides
           else "calibrated efficiencies (docs: Hardware, Calibration)" if exp["calibration"]
           else "no calibration in this hardware file: expected = ideal")
    lines = [f"expected: {how}; ideal: the roofline per component, max(FLOPs / peak, bytes / bandwidth) on "
             f"{hw.description or hw.name}: {si(hw.peak(rec['dtype']), 'FLOP/s')} {rec['dtype']} dense, "
             + (f"{si(hw.peak(rec['matmul_dtype']), 'FLOP/s')} {rec['matmul_dtype']} for the layers' matmuls, "
                if rec["matmul_dtype"] != rec["dtype"] else "") +
             f"{si(hw.memory_bandwidth, 'B/s')}, a bound no run beats"]
    if rec["mode"] == "generate":
        steps = run.replace(mode="decode", seq=rec["prompt"] + 1, chunk=None)
        absorbed = ", MLA absorbed" if mla_absorbed(cfg, steps) else ""
        lines += [f"time to first token: {seconds(exp['ttft_s'])} (ideal {seconds(rec['ttft_s'])}); time per output "
                  f"token: {seconds(exp['tpot_s'])} (ideal {seconds(rec['tpot_s'])}, mean of {count(rec['new'] - 1)} "
                  f"decode steps{absorbed})",
                  f"{count(rec['new'])} new tokens x batch {count(rec['batch'])}{_replicas(rec)}: "
                  f"{seconds(exp['total_s'])}, "
                  f"{exp['tokens_per_s']:,.1f} tokens/s (ideal {seconds(rec['total_s'])}, {rec['tokens_per_s']:,.1f})",
                  f"without a KV cache (each step recomputes the prefix): {seconds(exp['no_cache_total_s'])}, "
                  f"{exp['no_cache_total_s'] / exp['total_s']:,.1f}x longer"]
    comm = rec.get("communication")
    if comm and comm["collectives"]:  # data-parallel replicas alone communicate nothing
        kinds = ", ".join(f"{count(c['calls'])} x {c['kind']} ({c['what']})" for c in comm["collectives"])
        lines.append("communication (included above): prefill "
                     f"{seconds(comm['expected']['prefill_s'])} "
                     f"(ideal {seconds(comm['prefill_s'])}), each decode step {seconds(comm['expected']['step_s'])} "
                     f"(ideal {seconds(comm['step_s'])}): {kinds}, {iec(comm['step_sent'])} sent per GPU")
    util = rec.get("utilization")
    if util:
        if util["measured"]:
            lines.append(f"{util['tokens_per_s']:,.0f} tokens/s (measured) on {util['gpus']} GPU(s): MFU "
                         f"{util['mfu']:.1%} (llmcalc's {si(round(util['model_flops_per_token']), 'FLOP')}/token), "
                         f"HFU {util['hfu']:.1%}; 6N gives {util['mfu_6n']:.1%}, PaLM's 6N + 12LHQT "
                         f"{util['mfu_palm']:.1%}")
        else:
            lines.append(f"{exp['tokens_per_s']:,.0f} tokens/s expected on {util['gpus']} GPU(s): MFU {exp['mfu']:.1%} "
                         f"(llmcalc's {si(round(util['model_flops_per_token']), 'FLOP')}/token); at the ideal's "
                         f"{util['tokens_per_s']:,.0f} tokens/s: MFU {util['mfu']:.1%}, HFU {util['hfu']:.1%}")
        if max(util["mfu"], exp.get("mfu", 0.0)) > 1 >= util["hfu"]:  # past the executed FLOPs: warned of
            lines.append("MFU above 100%: the model FLOPs count attention dense, as PaLM's MFU does, and flash "
                         "attention runs its causal half; HFU counts the FLOPs executed")
    if rec["mode"] == "train" and cfg.moe is not None:
        lines.append(MOE_TRAINING)
    run = rec.get("training_run")
    if run and util["measured"]:
        lines.append(f"{si(run['tokens'])} tokens on {run['gpus']} GPU(s) at the measured throughput: "
                     f"{seconds(run['time_s'])}, {run['gpu_hours']:,.0f} GPU-hours (expected "
                     f"{seconds(exp['run_time_s'])}, {exp['gpu_hours']:,.0f})")
    elif run:
        lines.append(f"{si(run['tokens'])} tokens on {run['gpus']} GPU(s): {seconds(exp['run_time_s'])} expected, "
                     f"{exp['gpu_hours']:,.0f} GPU-hours (ideal {seconds(run['time_s'])}, "
                     f"{run['gpu_hours']:,.0f})")
    return lines


def _utilization(u, measured: bool, run_tokens: Optional[float], expected: dict,
                 expected_tokens_per_s: float) -> dict:
    """The JSON of a training run's MFU and HFU at ``u``'s throughput (the ideal's, or the one measured), and
    of a whole run of ``run_tokens`` at it; the expected throughput's into ``expected``, measured or not."""
    at = u._replace(tokens_per_s=expected_tokens_per_s)
    expected.update(tokens_per_s=expected_tokens_per_s, mfu=at.mfu)
    if run_tokens is not None:
        expected.update(run_time_s=at.run_time_s(run_tokens), gpu_hours=at.gpu_hours(run_tokens))
    out = {"utilization": {"tokens_per_s": u.tokens_per_s, "measured": measured, "gpus": u.gpus, "mfu": u.mfu,
                           "hfu": u.hfu, "mfu_6n": u.of(u.six_n_per_token), "mfu_palm": u.of(u.palm_per_token),
                           "model_flops_per_token": u.model_flops_per_token,
                           "hardware_flops_per_token": u.hardware_flops_per_token}}
    if run_tokens is not None:
        out["training_run"] = {"tokens": run_tokens, "gpus": u.gpus, "time_s": u.run_time_s(run_tokens),
                               "gpu_hours": u.gpu_hours(run_tokens)}
    return out


def step_json(cfg: ModelConfig, hw: Hardware, mode: str, st: "Step", eff: Efficiency, u, measured: bool,
              run_tokens: Optional[float]) -> dict:
    run, parts, compute, exp = st.run, st.parts_s, st.compute, st.expected
    expected_parts = exp.parts_s
    rec = {"model": cfg.name, "hardware": hw.name, "mode": mode, "seq_len": run.seq, "batch": run.batch,
           "attention": run.attention, "dtype": run.dtype, "matmul_dtype": run.matmul_dtype,
           "fp8_scaling": run.fp8_scaling, "grad_dtype": run.grad_dtype, "recompute": run.recompute,
           "all_logits": run.all_logits,
           "efficiency": IDEAL_EFFICIENCY, "gpus": run.layout.gpus,
           "layout": {**dataclasses.asdict(run.layout), "micro_batches": st.micro_batches}, "stage": st.stage,
           "time_s": st.time_s,
           # the slowest stage's compute over the step, as one GPU's roofline (DESIGN.md section 8 keys)
           "flops": compute.flops, "bytes": compute.bytes, "bound": compute.bound,
           "components": _components(compute),
           "parts_s": parts, "largest": max(parts, key=lambda k: parts[k]), "bubble": st.bubble,
           "micro_batch_s": list(st.compute_s), "tokens": st.tokens, "tokens_per_s": st.tokens_per_s,
           "sent_bytes": st.sent,
           "collectives": [{**c._asdict(), "sent": c.sent, "time_s": t, "expected_s": e}
                           for c, t, e in zip(st.collectives, st.collectives_s, exp.collectives_s)],
           "expected": {**expected_head(hw, eff), "time_s": exp.time_s, "parts_s": expected_parts,
                        "largest": max(expected_parts, key=lambda k: expected_parts[k]), "stage": exp.stage,
                        "micro_batch_s": list(exp.compute_s), "tokens_per_s": st.expected_tokens_per_s,
                        "bubble": exp.bubble}}
    if u is not None:
        rec.update(_utilization(u, measured, run_tokens, rec["expected"], st.expected_tokens_per_s))
    return rec


def _step_breakdown(cfg: ModelConfig, hw: Hardware, rec: dict, st: "Step") -> Report:
    run, exp = st.run, rec["expected"]
    total = exp["time_s"]
    what = "step" if rec["mode"] == "train" else "pass"
    title = (f"{cfg.name} on {rec['gpus']:,} x {hw.name}: {rec['mode']} {what}, {run.layout.describe()}, seq "
             f"{count(run.seq)}, {'micro-batch' if rec['mode'] == 'train' else 'batch'} {count(run.batch)} x "
             f"{count(st.micro_batches)}{'' if rec['mode'] == 'train' else ' in flight'}, {dtypes_tag(run)}"
             + (", MLA absorbed" if mla_absorbed(cfg, run) else ""))
    names = {"communication": "communication (exposed)"}
    parts = Table([text_col("part", key=True), Col("expected"), Col("share"), Col("ideal")],
                  [[(names.get(k, k), seconds(v), f"{100 * v / total:.1f}%", seconds(rec["parts_s"][k]))
                    for k, v in exp["parts_s"].items() if v or rec["parts_s"][k] or k == "compute"]], title,
                  footer=["total", seconds(total), "100.0%", seconds(rec["time_s"])])
    comm = Table([text_col("collective", key=True), text_col("kind"), text_col("group"), Col("GPUs"), Col("calls"),
                  Col("payload"), Col("sent/GPU"), Col("expected"), Col("ideal")],
                 [[(c["what"], c["kind"], c["group"], count(c["ranks"]), count(c["calls"]), iec(c["payload"]),
                    iec(c["sent"]), seconds(c["expected_s"]), seconds(c["time_s"])) for c in rec["collectives"]]],
                 f"communication of stage {st.stage} (the slowest), per {what}, before overlap",
                 footer=["total", "", "", "", "", "", iec(st.sent), "", ""])
    chunks = f" of {run.layout.vpp} chunks (interleaved)" if run.layout.vpp > 1 else ""
    flowing = ("micro-batches" if rec["mode"] == "train" else "batch in flight" if st.micro_batches == 1
               else "batches in flight (passes follow one another, the pipeline never drained)")
    ideal = f" (ideal {100 * st.bubble:.1f}%)" if f"{st.bubble:.3f}" != f"{st.expected.bubble:.3f}" else ""
    pipeline = (f"pipeline: {count(st.micro_batches)} {flowing} through {run.layout.pp} stages{chunks}, bubble "
                f"{100 * st.expected.bubble:.1f}% of the pipelined time{ideal}; " if run.layout.pp > 1 else "")
    links = [f"links: {rate(hw.intra_node)} per GPU within a node of {hw.gpus_per_node or rec['gpus']}, "
             f"{rate(hw.inter_node)} across nodes; expected: latency per call, NCCL's bus bandwidth, data-parallel "
             "communication partly hidden by the compute it runs beside; ideal: peak links, hidden by all of "
             "that compute"] if rec["collectives"] else []  # one GPU: nothing sent
    lines = [f"{pipeline}{si(rec['tokens'])} tokens per {what}, {exp['tokens_per_s']:,.0f} tokens/s expected "
             f"(ideal {rec['tokens_per_s']:,.0f})", *links, *_notes(cfg, hw, rec, run)]
    csv = [{**pick(rec, "model", "hardware", "mode", "seq_len", "batch", "gpus", "time_s", "memory_bytes"),
            **{f"layout.{k}": v for k, v in rec["layout"].items()}, "part": k, "part_s": v,
            "expected_part_s": exp["parts_s"][k]} for k, v in rec["parts_s"].items()]
    return Report(rec, csv, [parts, *([comm] if rec["collectives"] else []), *lines])


def _steps_side_by_side(records: list[dict], data, hw: Hardware, mode: str, batches: tuple[int, ...]) -> Report:
    rows = [(m["model"], count(m["seq_len"]), count(m["batch"]), count(m["layout"]["micro_batches"]),
             seconds(m["expected"]["time_s"]), seconds(m["time_s"]), m["expected"]["largest"],
             f"{100 * m['expected']['bubble']:.1f}%", iec(m["sent_bytes"]), iec(m["memory_bytes"]),
             f"{m['expected']['tokens_per_s']:,.0f}")
            for m in records]
    layout = Layout(**{**records[0]["layout"], "micro_batches": None})
    table = Table([text_col("model", key=True), Col("seq", key=True), Col("batch", key=True),
                   Col("micro-batches", key=True), Col("expected"), Col("ideal"), text_col("largest part"),
                   Col("bubble"),
                   Col("sent/GPU"), Col("memory"), Col("tokens/s")], [rows],
                  f"{mode} on {records[0]['gpus']:,} x {hw.name}, {layout.describe()}")
    csv = [{**pick(m, "model", "hardware", "mode", "seq_len", "batch", "gpus", "time_s", "largest", "bubble",
                   "sent_bytes", "memory_bytes", "tokens_per_s"), "expected.time_s": m["expected"]["time_s"],
            "expected.bubble": m["expected"]["bubble"]}
           for m in records]
    return Report(data, csv, [table])


def time_command(
    models: Models = None,
    hardware_spec: Annotated[str, hardware_option(
        "A bundled accelerator (`llmcalc hardware`) or a YAML file with the same keys.")] = ...,
    mode: Annotated[Literal[TIME_MODES], typer.Option(
        "--mode", help="generate: a prefill of --prompt tokens, then --new decode steps.",
        rich_help_panel=WORKLOAD)] = "train",
    seq: Annotated[Optional[Counts], seqs_option("Tokens per sequence (decode: the context), or a comma list: a "
                                                 "row for each. Default: the model's context length.")] = None,
    batch: MicroBatches = ONE,
    prompt: Annotated[Optional[int], typer.Option("--prompt", parser=whole, metavar="N", rich_help_panel=WORKLOAD,
                                                  help="generate: prompt tokens.")] = None,
    new: Annotated[Optional[int], typer.Option("--new", parser=whole, metavar="N", rich_help_panel=WORKLOAD,
                                               help="generate: new tokens per sequence.")] = None,
    chunk: Chunk = None,
    attention: Attention = "flash",
    recompute: Recompute = "none",
    all_logits: AllLogits = False,
    optimizer: Optimizer = "adam",
    dtype: Dtype = None,
    fp8_scaling: Fp8Scaling = None,
    weights_dtype: WeightsDtype = None,
    kv_dtype: KvDtype = None,
    state_dtype: StateDtype = None,
    grad_dtype: GradDtype = None,
    images: Images = 0,
    image_size: ImageSize = None,
    lora_rank: LoraRank = None,
    lora_alpha: LoraAlpha = None,
    lora_targets: LoraTargets = None,
    compute_efficiency: ComputeEfficiency = None,
    bandwidth_efficiency: BandwidthEfficiency = None,
    tokens_per_s: Annotated[Optional[float], typer.Option(
        "--tokens-per-s", parser=amount, metavar="RATE",
        help="train: your measured throughput over all the layout's GPUs: gives MFU and HFU.")] = None,
    tokens: Annotated[Optional[float], typer.Option(
        "--tokens", parser=amount, metavar="N", help="train: tokens of a whole run (e.g. 15e12): its time and "
                                                     "GPU-hours.")] = None,
    gpus: Gpus = None,
    tp: Tp = 1,
    cp: Cp = 1,
    pp: Pp = 1,
    vpp: Vpp = 1,
    dp: Dp = 1,
    ep: Ep = 1,
    zero: Zero = 0,
    sp: Sp = False,
    async_tp: AsyncTp = False,
    global_batch: GlobalBatch = None,
    fmt: Format = "table",
    json_out: Json = False,
) -> None:
    """How long: the expected time of each component (calibrated: the fraction of peak its kernels
    reach, their latency) beside the ideal roofline, max(FLOPs / peak, bytes moved / bandwidth), a
    bound no run beats; and whether it is compute-, memory- or latency-bound. generate: time to
    first token, time per output token and tokens/s, with and without a KV cache. train: MFU and
    HFU at a throughput, and the time of a whole run. With a parallel layout (--tp, --pp, --dp, ...): one GPU's step,
    compute, pipeline bubble and each collective over the interconnect. One model and one
    workload: a breakdown; several: a row for each.

    Examples:
      llmcalc time mistral-7b --hardware h100 --mode decode
      llmcalc time gpt2-xl --hardware h100 --mode prefill
      llmcalc time gpt2-xl --hardware l4 --seq 1024
      llmcalc time mistral-7b --hardware my-gpu.yaml --seq 512
      llmcalc time llama-3.1-70b --hardware h100 --seq 8192
        --tp 8 --pp 4 --dp 2 --sp --global-batch 64
      (generate: --mode generate --prompt 1000 --new 100)
    """
    fmt = output_format(fmt, json_out)
    eff = Efficiency(compute_efficiency, bandwidth_efficiency)
    generating = mode == "generate"
    if generating and (prompt is None or new is None):
        raise UsageError("--mode generate needs --prompt and --new")
    for option, value in (("--prompt", prompt), ("--new", new), ("--seq", seq)):
        if value is not None and generating == (option == "--seq"):
            warn(f"{option} does not apply to --mode {mode}; ignored")
    for option, value in (("--tokens-per-s", tokens_per_s), ("--tokens", tokens)):
        if value is not None and mode != "train":
            warn(f"{option} does not apply to --mode {mode}; ignored")
    run_modes = ("prefill", "decode") if generating else (mode,)
    given = applicable(run_modes, f"--mode {mode}", chunk=chunk, kv_dtype=kv_dtype, state_dtype=state_dtype,
                       recompute=recompute, optimizer=optimizer, grad_dtype=grad_dtype, zero=zero, vpp=vpp,
                       global_batch=global_batch)
    # a generation's prefill needs the last position's logits alone
    given.update(applicable((mode,), f"--mode {mode}", all_logits=all_logits))
    train = mode == "train"
    lora = lora_spec(lora_rank, lora_alpha, lora_targets)  # RunSpec refuses it outside training
    base, layouts = runs("prefill" if generating else mode, batch, attention=attention, dtype=dtype,
                         fp8_scaling=fp8_scaling, weights_dtype=weights_dtype, lora=lora, images=images,
                         image_size=image_size, tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, sp=sp, async_tp=async_tp, gpus=gpus,
                         **given)
    warn_idle(layouts[batch[0]])
    parallel = not layouts[batch[0]].one_pass
    measured = tokens_per_s if train else None
    run_tokens = tokens if train else None
    hw = load_hardware(hardware_spec)
    records, shown_runs = [], []
    seqs = (prompt,) if generating else seq
    cfgs = splittable(lora_models(models, lora), base.replace(seq=seqs and seqs[0], layout=layouts[batch[0]]),
                      models is None)
    for cfg, s, b in workloads(cfgs, seqs, batch, new if generating else 0, given["state_dtype"], base):
        spec = serving(cfg, base.replace(seq=s, batch=b), hw)  # fp8 weights: fp8 matmuls where the GPU has them
        if parallel and not generating:
            from ..analysis.cluster.step import step

            st = step(cfg, spec.replace(layout=layouts[b]), hw, eff)
            u = utilization(cfg, st.run.replace(layout=Layout()), hw, measured or st.tokens_per_s,
                            st.run.layout.gpus)
            records.append(step_json(cfg, hw, mode, st, eff, u if train else None, measured is not None, run_tokens))
            shown_runs.append((cfg, st))
            records[-1]["memory_bytes"] = memory(cfg, st.run).total
            continue
        spec = spec.replace(layout=layouts[b])
        if generating and parallel:
            from ..analysis.cluster.generation import generate as generate_parallel

            pg = generate_parallel(cfg, spec, hw, s, new, eff)
            gen, r = pg.generation, pg.generation.first
        elif generating:
            gen = generate(cfg, spec, hw, s, new, eff)
            r = gen.first
        else:
            r = prefill(cfg, spec, hw, eff) if mode == "prefill" else roofline(cfg, spec, hw, eff)
        rec = time_json(cfg, hw, mode, r, eff)
        if generating:
            per_s = pg.tokens_per_s if parallel else gen.tokens_per_s  # over every data-parallel GPU's batch
            figures = {e: {"ttft_s": gen.ttft_s(e), "tpot_s": gen.tpot_s(e), "tokens_per_s": per_s(b, e),
                           "total_s": gen.total_s(e), "no_cache_total_s": gen.no_cache_total_s(e),
                           "time_s": gen.total_s(e)} for e in (False, True)}
            rec.update(prompt=s, new=new, **figures[False])
            rec["expected"].update(figures[True])
            if parallel:
                rec.update(_communication(pg))
        if train:
            rec.update(_utilization(utilization(cfg, r.run, hw, measured or r.tokens_per_s), measured is not None,
                                    run_tokens, rec["expected"], r.run.tokens / r.expected_s))
        records.append(rec)
        shown_runs.append((cfg, r))
        rec["memory_bytes"] = generation_memory(cfg, spec, s, new) if generating else memory(cfg, spec).total
    _check_memory(hw, records)
    if measured is not None:
        for cfg, ran in shown_runs:  # a roofline, or a step on a layout: the ideal's throughput over its GPUs
            if measured > ran.tokens_per_s:
                warn(f"{cfg.name}: --tokens-per-s {measured:,.0f} is above the ideal's {ran.tokens_per_s:,.0f} "
                     "tokens/s, a bound no run beats: check the hardware, layout and dtype given")
    steps = parallel and not generating
    if len(records) == 1 and models:
        explain = _step_breakdown if steps else _breakdown
        emit(explain(shown_runs[0][0], hw, records[0], shown_runs[0][1]), fmt)
        return
    side_by_side = _steps_side_by_side if steps else _side_by_side
    emit(side_by_side(records, one_or_list(records, models), hw, mode, batch), fmt)


def _check_memory(hw: Hardware, records: list[dict]) -> None:
    """A warning where a record's ``memory_bytes`` (what its GPU holds at its peak, the peak GPU under a layout, as
    the memory function sizes it: :func:`analysis.cluster.memory.generation_memory` for a generation) exceeds the
    hardware's memory, since the time of a run that cannot start means nothing without it (several rows: one
    warning, the tables' memory column)."""
    over = [rec for rec in records if rec["memory_bytes"] > hw.memory]
    capacity = f"the {hw.name}'s {iec(hw.memory)}"
    if len(records) == 1 and over:
        rec = over[0]
        gpu = "the peak GPU" if rec.get("gpus", 1) > 1 else "the GPU"
        at = (f"--prompt {count(rec['prompt'])} --new {count(rec['new'])}" if rec["mode"] == "generate"
              else f"--seq {count(rec['seq_len'])}")
        warn(f"{rec['model']} at {at}, batch {count(rec['batch'])}: {gpu} needs {iec(rec['memory_bytes'])}, more "
             f"than {capacity} (llmcalc memory gives the parts); timed as if it fit")
    elif over:
        models = ", ".join(dict.fromkeys(rec["model"] for rec in over))
        warn(f"{len(over)} of {len(records)} rows need more memory than {capacity} (the memory column): {models}; "
             "timed as if they fit")


def _communication(pg: "ParallelGeneration") -> dict:
    """generate on a layout: its GPUs, and the prefill's and each decode step's communication."""
    first, step = pg.prefill, pg.decode
    layout = step.run.layout
    return {"gpus": layout.gpus, "layout": dataclasses.asdict(layout),
            "communication": {"prefill_s": first.communication_s, "step_s": step.communication_s,
                              "step_sent": step.sent, "decode_sent": pg.decode_sent,
                              "no_cache_sent": pg.no_cache_sent,
                              "expected": {"prefill_s": first.expected_communication_s,
                                           "step_s": step.expected_communication_s},
                              "collectives": [{**c._asdict(), "sent": c.sent, "time_s": i, "expected_s": e}
                                              for c, i, e in zip(step.collectives, step.ideal_s, step.expected_s)]}}


def _side_by_side(records: list[dict], data, hw: Hardware, mode: str, batches: tuple[int, ...]) -> Report:
    several = len(batches) > 1
    generating = mode == "generate"
    extra = ["TTFT", "TPOT", "tokens/s", "no cache"] if generating else []
    parallel = "layout" in records[0]  # a generation on a tensor-parallel group: its GPUs and layout
    gpus = f"{records[0]['gpus']:,} x " if parallel else ""
    layout = Layout(**records[0]["layout"]).describe() if parallel else ""
    rows = []
    for m in records:
        e = m["expected"]
        gen = [seconds(e["ttft_s"]), seconds(e["tpot_s"]), f"{e['tokens_per_s']:,.1f}",
               seconds(e["no_cache_total_s"])] if generating else []
        rows.append((m["model"], count(m["prompt"] if generating else m["seq_len"]),
                     *([count(m["batch"])] if several else []), seconds(e["time_s"]), e["bound"],
                     seconds(m["time_s"]), m["bound"], si(m["flops"], "FLOP"), iec(m["bytes"]),
                     iec(m["memory_bytes"]), *gen))
    table = Table([text_col("model", key=True), Col("prompt" if generating else "seq", key=True),
                   *([Col("batch", key=True)] if several else []), Col("expected"), text_col("bound"), Col("ideal"),
                   text_col("ideal bound"), Col("prefill FLOPs" if generating else "FLOPs"),
                   Col("prefill bytes" if generating else "bytes"), Col("memory"), *map(Col, extra)], [rows],
                  f"{mode} on {gpus}{hw.name}" + ("" if several else f", batch {count(batches[0])}")
                  + (f", {layout}: FLOPs and bytes per GPU" if layout else ""))
    csv = [{**pick(m, "model", "hardware", "mode", "seq_len", "batch", "gpus", "time_s", "bound", "flops", "bytes",
                   "memory_bytes"),
            "expected.time_s": m["expected"]["time_s"], **_generation_csv(m)} for m in records]
    return Report(data, csv, [table])
