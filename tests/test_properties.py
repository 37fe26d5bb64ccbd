"""The property harness: random valid configs (every key) x a workload x a feature (none, LoRA
adapters, a parallel layout), drawn by one strategy, and every property the analytic model must
have over them: equal to the reference modules on meta (parameters, FLOPs, saved bytes, KV
cache), and the identities that hold between its own figures (sums, conventions, bounds)."""

import dataclasses
from typing import NamedTuple, Optional

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from llmcalc.analysis.cluster.comm import collectives
from llmcalc.analysis.cluster.sharding import check_layout, gpu_state, stage_tensors, zero_stages
from llmcalc.analysis.cluster.step import link, step
from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.errors import SpecError
from llmcalc.analysis.load.catalog import load_bundled
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.model.config import ModelConfig
from llmcalc.analysis.model.layers import layer_config, layer_specs
from llmcalc.analysis.model.mixer import RECURRENT_TYPES
from llmcalc.analysis.perf.calibration import Efficiency
from llmcalc.analysis.perf.hardware import load_hardware
from llmcalc.analysis.perf.roofline import prefill, roofline
from llmcalc.analysis.spec import ALL_LINEAR, Layout, LoRA, RunSpec, linear_keys, lora_refusal, recompute_refusal
from tests.strategies import valid_configs, vision_configs
from tests.tower import image_flops

H100 = load_hardware("h100")


class Case(NamedTuple):
    cfg: ModelConfig
    run: RunSpec  # a training step: seq, batch, attention, recomputation, dtype, gradients' dtype, LoRA
    layout: Layout  # a layout of pipeline stages, data parallelism and ZeRO the model allows


@st.composite
def cases(draw, lora: bool = True, layouts: bool = False, recurrent: bool = True) -> Case:
    cfg = from_dict(draw(valid_configs(layouts, recurrent)), "random.yaml")
    attention = draw(st.sampled_from(["eager", "flash"]))
    adapters: Optional[LoRA] = None
    if lora and lora_refusal(cfg) is None and draw(st.booleans()):
        keys = linear_keys(cfg)
        targets = draw(st.one_of(st.just((ALL_LINEAR,)), st.lists(st.sampled_from(keys), min_size=1,
                                                                    unique=True).map(tuple)))
        adapters = LoRA(draw(st.integers(1, 4)), targets, draw(st.sampled_from([None, 2.0])))
    # per-op checkpointing where the model allows it (no recurrent mixer, DSA or adapters)
    recompute = draw(st.sampled_from([r for r in ("none", "full", *(["selective"] if attention == "eager" else []),
                                                  "op") if recompute_refusal(cfg, r, adapters) is None]))
    run = RunSpec("train", draw(st.integers(1, 24)), draw(st.integers(1, 3)), attention, recompute=recompute,
                  dtype=draw(st.sampled_from(["bf16", "fp16", "fp32"])), lora=adapters,
                  grad_dtype=draw(st.sampled_from([None, "fp32", "bf16", "fp16"])))
    pp = draw(st.integers(1, min(4, cfg.n_layers)))  # uneven stages where pp does not divide the layers
    vpp = draw(st.sampled_from([v for v in (1, 2) if v == 1 or (pp > 1 and pp * v <= cfg.n_layers)]))
    layout = Layout(pp=pp, dp=draw(st.integers(1, 4)), zero=draw(st.sampled_from(zero_stages(pp))), vpp=vpp)
    return Case(cfg, run, layout)


@st.composite
def wide_layouts(draw) -> Case:
    """A case whose layout also splits over tp, cp and ep, with sequence parallelism and async TP: each
    drawn in turn and kept where the model allows it (check_layout)."""
    case = draw(cases(lora=False, layouts=True))
    cfg, run, layout = case
    experts = cfg.moe.num_experts if cfg.moe else 1
    splits = {"tp": st.sampled_from([t for t in (2, 4) if cfg.n_heads % t == 0] or [1]),
              "cp": st.just(2), "ep": st.sampled_from([e for e in range(2, layout.dp + 1)
                                                        if layout.dp % e == 0 and experts % e == 0] or [1]),
              "sp": st.just(True), "async_tp": st.just(True)}
    for field, values in splits.items():
        if draw(st.booleans()):
            try:
                wide = dataclasses.replace(layout, **{field: draw(values)})  # Layout's own rules (sp needs tp)
                check_layout(cfg, run.replace(layout=wide))  # the model's
            except SpecError:
                continue
            layout = wide
    return case._replace(layout=layout)


def _recurrent(cfg: ModelConfig) -> bool:
    """Whether some layer has a recurrent mixer (Mamba): tensor and context parallelism and LoRA refuse it
    (docs: Conventions)."""
    return any(s.recurrent or s.beside is not None for s in layer_specs(cfg))


# -- against the reference modules --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.reference
@settings(max_examples=40, deadline=None)
@given(cases())
def test_analytic_equals_the_reference(case):
    """Parameters; forward and backward matmul FLOPs and the bytes saved for backward of one measured
    training step (eager or flash, each recomputation, each dtype, with or without adapters);
    prefill and decode FLOPs below and past every window; KV-cache bytes. Every variant's every
    step: tests/test_reference.py."""
    import llmcalc.analysis.verify.report as report

    cfg, run = case.cfg, case.run
    checks = report.training_checks(cfg, run.seq, run.batch, run.attention, run.recompute, "meta", run.lora,
                                    run.dtype)
    if run.lora is None:
        checks += (report.param_checks(cfg) + report.kv_checks(cfg, "meta", run.batch)
                   + report.inference_flop_checks(cfg, "meta", run.batch))
    failed = [c for c in checks if not c.ok]
    assert not failed, (cfg, run, failed)


@pytest.mark.reference
@settings(max_examples=15, deadline=None)
@given(vision_configs(), st.integers(1, 2))
def test_image_flops_equal_the_reference(cfg, sides):
    """One image per sequence through a random tower and projector (every vision key): forward and backward
    matmul FLOPs per key equal FlopCounterMode's on the reference (analysis/verify/vision.py)."""

    v = cfg.vision
    size = v.image_size or v.patch_size * v.projector.merge * (v.pool or 1) * sides
    try:
        analytic, measured, missed = image_flops(cfg, 4, 1, size)
    except SpecError:  # an image the tower cannot take (widths that do not chain, too few layers to read)
        assume(False)
    assert analytic == measured
    assert missed == 0  # the tower's tokens are those the count adds to the 4 text tokens


def _replicated(name: str, cfg: ModelConfig) -> bool:
    """Whether TP keeps the reference model's parameter ``name`` whole on every rank (DESIGN.md
    section 9): norms (a per-head qk-norm too; one over the whole projection splits with it),
    routers and the shared-expert gate, learned position tables (a T5 bias table splits with its
    heads), row-parallel biases, MLA's latent projections and DSA's indexer, xIELU's scalars, Gemma 4's layer
    scalars; a vision tower's stem, norms and row-parallel biases, and its projector."""
    parts = name.split(".")
    module, leaf = parts[-2], parts[-1]
    if parts[0] == "projector" or (parts[0] == "vision" and parts[1] != "layers"):
        return True  # the tower's stem, final norm and standardization, and the projector
    if parts[0] == "vision":  # a tower layer: its norms and o's and down's biases (vLLM's encoder)
        return "norm" in parts or module.endswith("_norm") or (leaf == "bias" and module in ("o", "down"))
    if "indexer" in parts:  # DSA's, ReplicatedLinear in vLLM and SGLang
        return True
    if name.startswith("embedding.position"):
        return cfg.position != "relative"
    if module in ("q_norm", "k_norm"):
        return cfg.qk_norm == "head"
    if module == "act" or leaf == "layer_scalar":  # xIELU's learned scalars, Gemma 4's per-layer one
        return True
    return ("norm" in parts or module in ("router", "shared_expert_gate", "q_a", "kv_a", "q_a_norm", "kv_a_norm")
            or (leaf == "bias" and module in ("o", "down")) or leaf == "down_bias")


@pytest.mark.reference
@settings(max_examples=40, deadline=None)
@given(cases(lora=False, layouts=True, recurrent=False), st.sampled_from([2, 4]))
def test_tp_ranks_sum_back_to_the_reference(case, tp):
    """tp ranks together hold every parameter of the reference model once, plus tp - 1 more copies
    of what TP replicates (a T5 bias table splits with its heads)."""
    import torch

    from llmcalc.analysis.verify.model import Transformer

    cfg = case.cfg
    # every split width made a multiple of tp (heads keep their size)
    moe = cfg.moe and dataclasses.replace(cfg.moe, expert_d_ff=cfg.expert_width * tp,
                                          shared_expert_d_ff=cfg.shared_expert_width * tp)
    heads = {} if cfg.attention == "mla" else {"n_kv_heads": cfg.kv_heads * tp, "head_dim": cfg.head_size,
                                                "full_kv_heads": cfg.full_kv_heads and cfg.full_kv_heads * tp}
    vision = cfg.vision and dataclasses.replace(cfg.vision, d_model=cfg.vision.d_model * tp,
                                                n_heads=cfg.vision.n_heads * tp, d_ff=cfg.vision.d_ff * tp)
    cfg = cfg.replace(n_heads=cfg.n_heads * tp, d_ff=cfg.d_ff * tp, vocab_size=cfg.vocab_size * tp, moe=moe,
                      vision=vision, **heads)
    with torch.device("meta"):
        model = Transformer(cfg)
    params = dict(model.named_parameters())
    total = sum(p.numel() for p in params.values())
    whole = sum(p.numel() for name, p in params.items() if _replicated(name, cfg))
    rank = sum(t.numel for t in stage_tensors(cfg, Layout(tp=tp), 0))
    assert tp * rank == total + (tp - 1) * whole


# -- identities of the analytic model -----------------------------------------------------------

def _seen(i: int, window: Optional[int], chunk: Optional[int]) -> int:
    """Keys the query at position i sees (causal): the last W, or its chunk's up to itself."""
    return i % chunk + 1 if chunk is not None else min(i + 1, window or i + 1)


def _spans(cfg: ModelConfig, absorbed: bool = False) -> list[tuple[Optional[int], Optional[int], int, int]]:
    """(window, chunk, score and value head sizes) of every attention layer (a recurrent mixer attends
    nowhere; a full layer may have heads of its own size: full_head_dim), and of every use of a shared
    transformer block (full causal MHA over twice the model's width). ``absorbed``: MLA's decode step
    under flash attention, over the latents."""
    spans = [(s.window, s.chunk, *_head_sizes(layer_config(cfg, s), absorbed))
             for s in layer_specs(cfg) if not s.recurrent]
    wide = dataclasses.replace(cfg, d_model=2 * cfg.d_model)
    return spans + [(None, None, wide.head_size, wide.head_size) for s in layer_specs(cfg) if s.shared]


def _head_sizes(cfg: ModelConfig, absorbed: bool = False) -> tuple[int, int]:
    if cfg.attention == "mla" and absorbed:  # scores over the latent and rope key, values the latents
        return cfg.mla.kv_lora_rank + cfg.mla.qk_rope_head_dim, cfg.mla.kv_lora_rank
    if cfg.attention == "mla":
        return cfg.mla.qk_nope_head_dim + cfg.mla.qk_rope_head_dim, cfg.mla.v_head_dim
    return cfg.head_size, cfg.head_size


@pytest.mark.unit
@settings(max_examples=150, deadline=None)
@given(cases())
def test_parameters_and_flops_identities(case):
    """Parameters sum to the total, active ones within it; dense and causal attention pairs in closed
    form; FLOPs linear in the batch; an eager backward twice its forward (but lightning's, Gated
    DeltaNet's and KDA's scans), flash's once more the scores (not with a T5 bias); a decode step never sees past
    a window."""
    cfg, w = case.cfg, case.run.replace(lora=None, recompute="none")
    assume(cfg.dsa is None)  # DSA attends to its top-k keys: its closed form is tests/test_against.py's
    p = count_params(cfg)
    assert sum(p.components.values()) == p.total and 0 < p.active <= p.total
    seq, batch = w.seq, w.batch
    dense, causal = count_flops(cfg, w.replace(attention="flash")), count_flops(cfg, w.replace(causal=True))
    assert causal.forward.matmul_total <= dense.forward.matmul_total
    h, spans = cfg.n_heads, _spans(cfg)
    pairs = [(sum(_seen(i, W, C) for i in range(seq)), score, value) for W, C, score, value in spans]
    assert causal.forward.matmul.get("attention/scores", 0) == sum(2 * batch * h * n * sc for n, sc, _ in pairs)
    assert causal.forward.matmul.get("attention/values", 0) == sum(2 * batch * h * n * v for n, _, v in pairs)
    assert dense.forward.matmul.get("attention/scores", 0) == sum(2 * batch * h * seq * seq * sc for _, sc, _ in pairs)
    assert dense.forward.matmul.get("attention/values", 0) == sum(2 * batch * h * seq * seq * v for _, _, v in pairs)
    single = count_flops(cfg, w.replace(attention="flash", batch=1))
    assert dense.total.matmul_total == batch * single.total.matmul_total
    eager = count_flops(cfg, w.replace(attention="eager"))
    # but for the scans whose backward skips products (the reference measures them: tests/test_reference.py)
    skips = ("lightning/attention", "gated_deltanet/scan", "kda/scan")
    assert {k: v for k, v in eager.backward.matmul.items() if k not in skips} == {
        k: 2 * v for k, v in eager.forward.matmul.items() if k not in skips}
    recomputed = 0 if cfg.position == "relative" else dense.forward.matmul.get("attention/scores", 0)
    assert dense.backward.matmul_total - eager.backward.matmul_total == recomputed
    # MLA decodes absorbed under flash (not with a T5 bias, which runs eager, nor with nothing cached): kv_b on the
    # one new token, the scores and values over the latents; eager decompresses every key it reads
    mla = [s for s in layer_specs(cfg) if s.attention == "mla"]
    for attention in ("flash", "eager"):
        absorbed = attention == "flash" and cfg.position != "relative" and seq > 1
        dec = count_flops(cfg, RunSpec("decode", seq, batch, attention)).forward.matmul
        spans = _spans(cfg, absorbed)
        assert dec.get("attention/scores", 0) == sum(2 * batch * h * _seen(seq - 1, W, C) * sc
                                                     for W, C, sc, _ in spans)
        assert dec.get("attention/values", 0) == sum(2 * batch * h * _seen(seq - 1, W, C) * v for W, C, _, v in spans)
        if mla:
            m = cfg.mla
            rows = [batch if absorbed else batch * _seen(seq - 1, s.window, s.chunk) for s in mla]
            assert dec["attention/kv_b"] == sum(2 * n * m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
                                                for n in rows)


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(cases(), st.floats(1.0, 8.0), st.floats(1.0, 8.0), st.sampled_from(["train", "prefill", "decode"]),
       st.integers(1, 24))
def test_time_identities(case, more_bw, more_flops, mode, chunk):
    """More bandwidth or FLOP/s is never slower, half the efficiency twice the time; a chunked
    prefill's FLOPs telescope to the unchunked causal count (MLA decompresses its cached latents
    again in every chunk: more FLOPs, by design, so it is left out of that one; a recurrent mixer's
    scan restarts its chunks at each prefill chunk and its conv continues the cached inputs: all
    but its components telescope, and the pass-by-pass loop of tests/test_time.py checks those)."""
    cfg = case.cfg
    run = RunSpec(mode, cfg.context_length, 2, dtype="bf16")
    faster = H100._replace(memory_bandwidth=int(H100.memory_bandwidth * more_bw),
                                 peak_flops={k: int(v * more_flops) for k, v in H100.peak_flops.items()})
    assert roofline(cfg, run, faster).time_s <= roofline(cfg, run, H100).time_s
    # the overrides replace the calibrated fractions of the expected time (its kernel latencies stay)
    slow = roofline(cfg, run, H100, Efficiency(0.5, 0.5))
    latency = sum(c.latency_s for c in slow.components.values())
    assert slow.expected_s - latency == pytest.approx(2 * roofline(cfg, run, H100).time_s)
    if cfg.attention == "mla":
        cfg = cfg.replace(attention="mha", mla=None, head_dim=2)  # MLA's heads need not divide d_model
    seq = case.run.seq
    chunks = RunSpec("prefill", seq, 2, chunk=chunk)
    chunked, whole = prefill(cfg, chunks, H100), count_flops(cfg, chunks.replace(causal=True)).total
    if _recurrent(cfg):
        for key, c in chunked.components.items():
            if key.split("/")[0] not in RECURRENT_TYPES:
                assert c.matmul_flops == whole.matmul.get(key, 0)
                assert c.elementwise_flops == whole.elementwise.get(key, 0)
    else:
        assert chunked.flops == whole.total
        assert sum(c.matmul_flops for c in chunked.components.values()) == whole.matmul_total
    assert (chunked.run.seq, chunked.run.past, chunked.run.tokens) == (seq, 0, 2 * seq)  # the whole prefill's


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(wide_layouts(), st.integers(1, 3), st.sampled_from([1, 2, 8]), st.booleans())
@example(Case(load_bundled("llama-3.1-70b"), RunSpec("train", 8192, 2, recompute="full"), Layout(tp=2, dp=32, zero=3)),
         1, 8, False)  # plan's ZeRO-3 layout on 64 GPUs: the ideal step overlapped nothing, slower than expected
def test_the_ideal_step_is_never_slower_than_the_expected(case, rounds, per_node, free):
    """The ideal is an upper bound on speed, on a cluster too: every time figure of the expected step
    (each stage's compute and pipeline slot, each collective, the optimizer, the step) is at least
    the ideal's, with data-parallel communication overlapped in both (the ideal hides all it can),
    within a node or across nodes; also without latencies and at the links' peaks (``free``), where
    the expected step differs from the ideal only by its compute and overlap."""
    cfg, layout = case.cfg, case.layout
    layout = dataclasses.replace(layout, micro_batches=rounds * layout.pp)
    cal = H100.calibration
    if free:
        cal = cal._replace(kernel_s=0.0, latency_intra_s=0.0, latency_inter_s=0.0, bus_intra=1.0,
                                  bus_inter=1.0)
    hw = H100._replace(gpus_per_node=per_node, calibration=cal)
    st_ = step(cfg, case.run.replace(layout=layout), hw)
    exp = st_.expected
    assert all(e >= i for e, i in zip(exp.compute_s, st_.compute_s))
    assert all(exp.slot_s(s) >= st_.slot_s(s) for s in range(layout.pp))
    assert all(e >= c.sent / link(hw, layout, c.group).rate for e, c in zip(exp.collectives_s, st_.collectives))
    assert exp.optimizer_s >= st_.optimizer_s
    assert exp.time_s >= st_.time_s
    assert exp.parts_s["bubble"] >= st_.parts_s["bubble"]


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(cases(lora=False, layouts=True), st.sampled_from(["prefill", "decode"]), st.integers(1, 6))
def test_an_inference_pipeline_is_one_gpus_pass_and_the_sends(case, mode, in_flight):
    """Inference through the case's pipeline stages with 1 to 6 batches in flight: one batch's pass is one GPU's
    roofline and the sends between stages (the stages split every component's work); more batches never take
    less than that, nor less than their own passes on one GPU, nor more than one batch's pass each; the expected
    pass is never faster than the ideal."""
    cfg, pp = case.cfg, case.layout.pp
    run = RunSpec(mode, case.run.seq, case.run.batch)
    one_gpu = roofline(cfg, run, H100).time_s
    single = step(cfg, run.replace(layout=Layout(pp=pp)), H100)
    assert single.time_s == pytest.approx(one_gpu + sum(single.comm_s), rel=1e-9)
    pipe = step(cfg, run.replace(layout=Layout(pp=pp, micro_batches=in_flight)), H100)
    assert max(single.time_s, in_flight * one_gpu / pp) * (1 - 1e-9) <= pipe.time_s
    assert pipe.time_s <= in_flight * single.time_s * (1 + 1e-9)
    assert pipe.expected.time_s >= pipe.time_s and single.expected.time_s >= single.time_s


@pytest.mark.unit
@settings(max_examples=40, deadline=None)
@given(wide_layouts())
def test_the_gradient_dtype_sizes_the_gradients_alone(case):
    """fp32 gradients against bf16 ones (a bf16 run): every GPU's gradients part and the payload of every
    data-parallel gradient reduction (and a tied embedding's between the pipeline ends) twice as large;
    the other parts and collectives (ZeRO's weight all-gathers, the activations' gradients under tp, cp
    and pp) the same."""
    from llmcalc.analysis.cluster.memory import memory

    cfg = case.cfg
    runs = [case.run.replace(dtype="bf16", grad_dtype=g, layout=case.layout) for g in ("bf16", "fp32")]
    half, full = (memory(cfg, r) for r in runs)
    # every stage's GPU: 2 bytes more a gradient element (the larger gradients may move the peak to another stage)
    totals = [m.stage_totals or (m.total,) for m in (full, half)]  # one GPU: no stages
    assert [f - b for f, b in zip(*totals, strict=True)] == [
        2 * gpu_state(cfg, case.layout, s).gradients for s in range(case.layout.pp)]
    if full.stage == half.stage:
        assert full.parts["gradients"] == 2 * half.parts["gradients"]
        assert {k: v for k, v in full.parts.items() if k != "gradients"} == {
            k: v for k, v in half.parts.items() if k != "gradients"}
    for s in range(case.layout.pp):
        pairs = list(zip(*(collectives(cfg, r, s) for r in runs), strict=True))
        for b, f in pairs:
            reduced = b.group in ("dp", "dp/ep", "pp ends") and b.kind != "all-gather"
            assert (b.what, b.calls) == (f.what, f.calls) and f.payload == (2 if reduced else 1) * b.payload


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(cases(lora=False, layouts=True))
def test_pipeline_stages_sum_back_to_the_model(case):
    """Without TP: the stages hold every parameter once (a tied head adds its copy on the last stage
    when pp > 1), and ZeRO gives rank 0 at least 1/dp of its stage and less than 1/dp plus one row
    of each tensor."""
    cfg, layout = case.cfg, case.layout
    pp, dp, zero = layout.pp, layout.dp, layout.zero
    held = [sum(t.numel for t in stage_tensors(cfg, layout, s)) for s in range(pp)]
    copy = cfg.vocab_size * cfg.d_model if cfg.tie_embeddings and pp > 1 else 0
    assert sum(held) == count_params(cfg).total + copy
    for s in range(pp):
        state, tensors = gpu_state(cfg, layout, s), stage_tensors(cfg, layout, s)
        if zero:
            sharded = {1: state.optimizer, 2: state.gradients, 3: state.weights}[zero]
            rows = sum(t.numel // t.shape[0] for t in tensors)
            assert held[s] <= dp * sharded < held[s] + dp * rows
    from llmcalc.analysis.model.formats import WEIGHT_FORMATS
    if cfg.dtype in WEIGHT_FORMATS:  # a quantized checkpoint's stages hold its stored bytes once (the copy in bf16)
        from llmcalc.analysis.cluster.stored import held_bytes, held_units
        from llmcalc.analysis.count.quant import weights_bytes
        stored = [held_bytes(cfg, layout, s, cfg.dtype, "bf16", False) for s in range(pp)]
        assert sum(stored) == weights_bytes(cfg, cfg.dtype, "bf16") + 2 * copy
        for s in range(pp):  # ZeRO-3 splits the codes: at least 1/dp of them on rank 0, the scales whole
            units = held_units(cfg, layout, s, cfg.dtype, "bf16")
            assert all(u.whole - u.state <= dp * u.shard and u.state <= u.whole for u in units)


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(cases(layouts=True), st.data())
def test_gpus_flops_sum_back_to_the_model(case, data):
    """Without TP, the GPUs of a pipeline stage and context-parallel rank each (flops under a layout: the stage's
    layers, the embedding's ops on the first, the final norm and head on the last; a rank's tokens, its queries'
    pairs, a prefill's logits on rank 0) add up to the model's pass, component by component, in either
    convention: no FLOP lost or counted twice by the split."""
    from llmcalc.analysis.cluster.flops import gpu_flops

    cfg, layout = case.cfg, case.layout
    mode, causal = data.draw(st.sampled_from(["train", "prefill"])), data.draw(st.booleans())
    cp = data.draw(st.sampled_from([1, 2, 3])) if case.run.attention == "flash" and not cfg.has_recurrent else 1
    run = case.run.replace(seq=2 * cp * data.draw(st.integers(1, 6)), causal=causal)
    if mode == "prefill":  # the step's own fields back to their defaults
        run = RunSpec("prefill", run.seq, run.batch, run.attention, causal, all_logits=data.draw(st.booleans()),
                      dtype=run.dtype)
    wide = dataclasses.replace(layout, cp=cp, vpp=layout.vpp if mode == "train" else 1)
    try:
        check_layout(cfg, run.replace(layout=wide))
    except SpecError:
        assume(False)
    whole = count_flops(cfg, run)
    gpus = [gpu_flops(cfg, run.replace(layout=wide), s, r).report for s in range(wide.pp) for r in range(cp)]
    for part in ("forward", "backward"):
        for kind in ("matmul", "elementwise"):
            summed: dict[str, int] = {}
            for g in gpus:
                for k, v in getattr(getattr(g, part), kind).items():
                    summed[k] = summed.get(k, 0) + v
            assert {k: v for k, v in summed.items() if v} == getattr(getattr(whole, part), kind), (part, kind)


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(cases(lora=False, layouts=True, recurrent=False), st.data())
def test_lora_under_a_layout_trains_the_adapters_alone(case, data):
    """With adapters, a layout's stages hold every adapter parameter once as trained state (ZeRO
    shards it) and the base as frozen weights, and a GPU's gradients are its adapters'."""
    from llmcalc.analysis.cluster.memory import memory
    from llmcalc.analysis.cluster.sharding import unit_sizes
    from llmcalc.analysis.cluster.stored import held_bytes
    from llmcalc.analysis.count.lora import adapter_params
    from llmcalc.analysis.model.formats import WEIGHT_FORMATS
    from llmcalc.analysis.model.sizes import weight_bytes

    cfg, layout = case.cfg, case.layout
    targets = data.draw(st.one_of(st.just((ALL_LINEAR,)), st.lists(st.sampled_from(linear_keys(cfg)), min_size=1,
                                                                    unique=True).map(tuple)))
    lora = LoRA(data.draw(st.integers(1, 4)), targets)
    run = case.run.replace(lora=lora, recompute="full" if case.run.recompute == "op" else case.run.recompute)  # no op
    trained = [sum(n for n, _ in unit_sizes(cfg, layout, s, lora)) for s in range(layout.pp)]
    assert sum(trained) == sum(adapter_params(cfg, lora).values())
    for s in range(layout.pp):
        state = gpu_state(cfg, layout, s, lora)
        base = gpu_state(cfg, layout, s)
        assert state.frozen == base.weights and state.gradients <= trained[s]
        if layout.zero == 0 or layout.replicas == 1:
            assert state.optimizer == trained[s]
        else:  # ZeRO shards it, but a tensor of fewer values than GPUs stays whole on the first (Tensor.shard)
            assert state.optimizer <= trained[s]
    report = memory(cfg, run.replace(layout=layout))
    peak = gpu_state(cfg, layout, report.stage, lora)
    assert report.parts["gradients"] == weight_bytes(peak.gradients, report.run.grad_dtype)
    weights = report.run.weights_dtype  # QLoRA on a quantized checkpoint: its format, ZeRO-3 splitting the codes
    base = (held_bytes(cfg, layout, report.stage, weights, report.run.dtype, layout.zero == 3)
            if weights in WEIGHT_FORMATS else weight_bytes(peak.frozen, weights))
    assert report.parts["weights"] == base + weight_bytes(peak.weights, report.run.dtype)
