"""Parallel layouts checked on torch.distributed (issue 12 item 5), and the communication
figures against closed forms written here.

The torch side shards the reference model with DTensor's tensor-parallel plans and FSDP2 on a
fake process group and counts collectives with CommDebugMode; nothing in it reads llmcalc's
formulas. The closed forms are Megatron's and ZeRO's published per-step volumes.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmcalc.analysis.cluster.comm import collectives
from llmcalc.analysis.cluster.memory import memory
from llmcalc.analysis.cluster.sharding import one_gpu_only
from llmcalc.analysis.cluster.step import step
from llmcalc.analysis.errors import SpecError
from llmcalc.analysis.load.catalog import load_model
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.perf.hardware import load_hardware
from llmcalc.analysis.perf.roofline import roofline
from llmcalc.analysis.spec import Layout, RunSpec
from llmcalc.analysis.verify.distributed import check_layout_on_torch, unsupported

from .strategies import BASE, VARIANTS

pytestmark = pytest.mark.reference


def test_gpt2_small_tp2_dp2_zero3_passes_against_torch_distributed(run, bundled_copy):
    """GPT-2 small's shape with 3 of its 12 layers (CI runs all 12; so does the README's example)."""
    result = run("verify", bundled_copy("gpt2-small", 3), "--tp", "2", "--dp", "2", "--zero", "3", "--seq", "32",
                 "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    checks = {c["name"]: c for c in record["checks"]}
    assert all(c["ok"] for c in checks.values())
    assert record["gpus"] == 4 and record["layout"]["tp"] == 2
    # what torch measured, against closed forms: Megatron's 2 all-reduces per layer forward and 2
    # backward, the vocab-parallel embedding and LM head one each, the cross-entropy's 3 (fp32 per
    # token); FSDP2 gathers the layers + the root forward, the layers again backward
    L, B, S, d = 3, 2, 32, 768
    assert checks["comm/tp/all-reduce/calls"]["measured"] == 4 * L + 2 + 3
    assert checks["comm/tp/all-reduce/bytes"]["measured"] == (4 * L + 2) * B * S * d * 4 + 3 * B * S * 4
    assert checks["comm/dp/all-gather/calls"]["measured"] == 2 * L + 1
    assert checks["comm/dp/reduce-scatter/calls"]["measured"] == L + 1
    # the root unit: the vocab-parallel embedding (rows ceil(V/2) = 25,129, padded to 2 x 12,565),
    # the position table and the final norm
    root = 2 * 12565 * d + 1024 * d + 2 * d
    qkv, o = 3 * d * d // 2 + 3 * d // 2, d * d // 2 + d  # column-parallel halves; o's bias whole
    up, down = 4 * d * d // 2 + 4 * d // 2, 4 * d * d // 2 + d
    layer = qkv + o + up + down + 4 * d  # and two LayerNorms
    assert checks["comm/dp/reduce-scatter/bytes"]["measured"] == 4 * (root + L * layer)
    assert checks["rank 0/weights"]["measured"] == (root + L * layer) // 2


def small(name: str, **changes):
    return load_model(name).replace(name=name, **changes)


@pytest.mark.parametrize("cfg, layout", [
    # GQA, RoPE, SwiGLU, q/k/v biases, tied head, a vocabulary tp does not divide
    (small("qwen2.5-0.5b", n_layers=2, vocab_size=1001, d_model=64, n_heads=4, n_kv_heads=2, d_ff=96),
     Layout(tp=2, dp=2, zero=3)),
    # parallel block, partial rotary, untied head, uneven FSDP shards over 3
    (small("pythia-410m", n_layers=2, vocab_size=1000, d_model=64, n_heads=4, d_ff=96), Layout(tp=2, dp=3, zero=3)),
    # TP alone, untied: the embedding's gradient stays vocab-parallel (FSDP2 over one GPU lands it)
    (small("pythia-410m", n_layers=2, vocab_size=1000, d_model=64, n_heads=4, d_ff=96), Layout(tp=2)),
    # sandwich norms, soft-capping, sliding windows
    (small("gemma-2-9b", n_layers=2, vocab_size=512, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=96),
     Layout(tp=2)),
    # the attention output gate, column-parallel like q
    (from_dict({**BASE, "d_model": 64, "n_kv_heads": 2, "position": "rope", "norm": "rmsnorm",
                "activation": "swiglu", "attention_gate": True}), Layout(tp=2, dp=2, zero=3)),
])
def test_dense_layouts_match_torch(cfg, layout):
    checks = check_layout_on_torch(cfg, layout, 16, 2)
    assert [c for c in checks if not c.ok] == []
    assert any(c.name.startswith("comm/") for c in checks)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_vocab_parallel_loss_keeps_its_share_of_the_fp32_log_softmax(dtype):
    """torch's vocab-parallel cross-entropy (``loss_parallel``, as verify runs it) on the reference's loss, measured
    on rank 0 of a fake group of 4: it keeps the fp32 log-softmax of its ceil(V/4) vocabulary columns and the fp32
    total weight, whatever the logits' dtype (the targets are the token ids the embedding keeps): memory's
    ``logits`` on a GPU of --tp 4."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.tensor.parallel import loss_parallel
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from llmcalc.analysis.verify.measure import training_loss

    cfg, tp, B, S = load_model("gpt2-small"), 4, 2, 8  # V = 50,257: rank 0 has 12,565 columns
    torch_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    tokens = torch.zeros(B, S, dtype=torch.long)
    saved: dict[int, int] = {}

    def pack(t):
        local = t.to_local() if hasattr(t, "to_local") else t
        storage = local.untyped_storage()
        if storage._cdata != tokens.untyped_storage()._cdata:
            saved[storage._cdata] = storage.nbytes()
        return t

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=tp)
    try:
        mesh = init_device_mesh("cpu", (tp,))
        full = torch.zeros(B, S, cfg.vocab_size, dtype=torch_dtype, requires_grad=True)
        logits = distribute_tensor(full, mesh, [Shard(2)])
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), loss_parallel():
            training_loss(logits, tokens)
    finally:
        dist.destroy_process_group()
    assert sum(saved.values()) == B * S * 12565 * 4 + 4
    run = RunSpec("train", S, B, dtype=dtype, layout=Layout(tp=tp))
    assert memory(cfg, run).parts["logits"] == sum(saved.values())


ONE_GPU = sorted(k for k, v in VARIANTS.items() if one_gpu_only(from_dict({**BASE, **v})))


@pytest.mark.parametrize("variant", ONE_GPU)
def test_variants_on_one_gpu_only_are_not_sharded_on_torch(variant):
    """A variant whose layouts check_layout refuses (sharding.one_gpu_only) is one unsupported() names too, so
    that no caller draws it for torch.distributed."""
    cfg = from_dict({**BASE, **VARIANTS[variant]})
    assert "sized on one GPU only" in unsupported(cfg, Layout(dp=2, zero=3))
    with pytest.raises(SpecError, match="sized on one GPU only"):
        check_layout_on_torch(cfg, Layout(dp=2, zero=3), 8, 2)


@pytest.mark.slow
@given(variant=st.sampled_from(sorted(k for k, v in VARIANTS.items() if "ffn_layers" not in v
                                       and not unsupported(from_dict({**BASE, **v}), Layout(dp=2, zero=3)))),
       tp=st.sampled_from([1, 2]), dp=st.integers(1, 3))
@settings(max_examples=25, deadline=None)
def test_random_variants_match_torch(variant, tp, dp):
    """Every variant FSDP2 can shard (all but those with layers without an MLP and those llmcalc sizes on one GPU
    only: a vision tower, hyper-connections, KV shared across layers, Gemma 3n's layers, Zamba's shared block ...,
    and DSA's indexer, without gradient in the reference: unsupported()), recurrent mixers included, with TP where
    DTensor's plans apply."""
    cfg = from_dict({**BASE, **VARIANTS[variant]})
    layout = Layout(tp=tp, dp=dp, zero=3 if dp > 1 else 0)
    if layout.trivial or unsupported(cfg, layout) or cfg.n_heads % tp:
        layout = Layout(dp=2, zero=3)
    checks = check_layout_on_torch(cfg, layout, 8, 2)
    assert [c for c in checks if not c.ok] == []


RECURRENT = sorted(k for k, v in VARIANTS.items() if from_dict({**BASE, **v}).has_recurrent
                   and not unsupported(from_dict({**BASE, **v}), Layout(dp=3, zero=3)))


@pytest.mark.slow
@pytest.mark.parametrize("variant", RECURRENT)
def test_recurrent_variants_shard_as_fsdp2_does(variant):
    """Each recurrent mixer's tensors as the reference holds them (a conv's (C, 1, K) weight, Mamba's (E, N) A_log,
    RG-LRU's block-diagonal gates): ZeRO-3 over 3 GPUs, whose rows do not split evenly, gives rank 0 the state and
    the traffic FSDP2 gives it."""
    cfg = from_dict({**BASE, **VARIANTS[variant]})
    checks = check_layout_on_torch(cfg, Layout(dp=3, zero=3), 8, 2)
    assert [c for c in checks if not c.ok] == [] and len(checks) > 3


@pytest.mark.parametrize("args, message", [
    (["gpt2-small", "--pp", "2"], "pipeline, expert, sequence and context parallelism are checked on the formulas"),
    (["gpt2-small", "--dp", "2"], "data parallelism is checked with FSDP2, which is ZeRO-3: add --zero 3"),
    (["deepseek-v3", "--tp", "2"], "not with multi-head latent attention, experts"),
    (["gpt2-small", "--tp", "5"], "tp 5 must divide the 12 attention heads"),
    (["gpt2-small", "--tp", "2", "--against", "transformers"], "not with --against or --hardware"),
    (["llama-3.1-70b", "--tp", "2"], "at most 8 GiB"),
])
def test_layout_checks_that_cannot_run_exit_2(run, args, message):
    result = run("verify", *args)
    assert result.exit_code == 2 and message in result.output, result.output


TOKENS = 4096 * 1  # seq x micro-batch


def sent(cfg, layout, mode="train", **kw):
    return sum(c.sent for c in collectives(cfg, RunSpec(mode, 4096, 1, layout=layout, **kw), 0))


def test_tensor_parallel_volume_is_megatrons():
    """Korthikanti et al. (2022): per layer and micro-batch 4 all-reduces of b*s*h (2 forward, 2
    backward), each sending 2(t-1)/t of it; with sp the same bytes as reduce-scatters and
    all-gathers, and backward gathers each region's saved sequence shard again for the weight
    gradients (their section 4.2.2, Megatron-LM's async all-gather), two a layer and the LM head's;
    full recomputation adds the 2 forward ones again."""
    cfg = load_model("llama-3.1-70b")
    t, L, h, b = 8, 80, 8192, 2  # bf16
    per_layer = 4 * 2 * (t - 1) * TOKENS * h * b // t
    ends = 2 * 2 * (t - 1) * TOKENS * h * b // t + 3 * 2 * (t - 1) * TOKENS * 4 // t  # embedding, head, loss
    assert sent(cfg, Layout(tp=t)) == L * per_layer + ends
    # sp: the embedding's partial sums are reduce-scattered into the sequence shards (half an
    # all-reduce); the LM head all-gathers its input and reduce-scatters its gradient
    ends_sp = 3 * (t - 1) * TOKENS * h * b // t + 3 * 2 * (t - 1) * TOKENS * 4 // t
    regathered = (2 * L + 1) * (t - 1) * TOKENS * h * b // t
    assert sent(cfg, Layout(tp=t, sp=True)) == L * per_layer + ends_sp + regathered
    # full recomputation runs the forward again, which saves the shards again: gathered again all the same
    assert sent(cfg, Layout(tp=t, sp=True), recompute="full") == L * per_layer * 3 // 2 + ends_sp + regathered
    assert sent(cfg, Layout(tp=t), recompute="full") == L * per_layer * 3 // 2 + ends


def test_data_parallel_volume_is_zeros():
    """Rajbhandari et al. (2020): data parallelism and ZeRO-1/2 move 2(d-1)/d of the gradients per
    step, ZeRO-3 3(d-1)/d (weights gathered for forward and for backward, gradients
    reduce-scattered); llama-2-7b's tensors all split evenly over 8."""
    cfg, d = load_model("llama-2-7b"), 8
    P = 6_738_415_616  # Llama 2 7B's published count (Meta)
    for zero in (0, 1, 2):
        assert sent(cfg, Layout(dp=d, zero=zero)) == 2 * (d - 1) * 2 * P // d
    # over m micro-batches ZeRO-0 and -1 accumulate whole gradients and reduce once; ZeRO-2 keeps
    # only its shard, so it reduce-scatters every micro-batch's (DeepSpeed #2252)
    m = 4
    assert sent(cfg, Layout(dp=d, zero=1, micro_batches=m)) == 2 * (d - 1) * 2 * P // d
    assert sent(cfg, Layout(dp=d, zero=2, micro_batches=m)) == (m + 1) * (d - 1) * 2 * P // d
    root = 2 * 32000 * 4096 + 4096  # embedding, LM head, final norm: not gathered again for backward
    assert sent(cfg, Layout(dp=d, zero=3)) == 3 * (d - 1) * 2 * P // d - (d - 1) * 2 * root // d


def test_pipeline_sends_activations_and_gradients():
    cfg = load_model("llama-2-7b")
    layout = Layout(pp=4, micro_batches=8)
    act = TOKENS * 4096 * 2
    run = RunSpec("train", 4096, 1, layout=layout)
    by_stage = [sum(c.sent for c in collectives(cfg, run, s) if c.group == "pp") for s in range(4)]
    assert by_stage == [8 * act, 16 * act, 16 * act, 8 * act]


def test_expert_parallel_all_to_all():
    """Each MoE layer dispatches and combines T x k token slots, forward and backward."""
    cfg = load_model("mixtral-8x7b")
    ep, k, L = 8, 2, 32
    a2a = [c for c in collectives(cfg, RunSpec("train", 4096, 1, layout=Layout(dp=8, ep=ep)), 0)
           if c.kind == "all-to-all"]
    assert sum(c.sent for c in a2a) == 4 * L * (ep - 1) * TOKENS * k * 4096 * 2 // ep


def test_inference_gathers_the_logits():
    cfg = load_model("llama-3-8b")
    cs = collectives(cfg, RunSpec("decode", 4096, 4, layout=Layout(tp=4)), 0)
    gather = [c for c in cs if c.kind == "all-gather"]
    assert [(c.calls, c.payload) for c in gather] == [(1, 4 * 128256 * 2)]
    assert sum(c.calls for c in cs if c.kind == "all-reduce") == 2 * 32 + 1


def test_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1():
    """1F1B: m micro-batches through p stages take m + p - 1 slots of the slowest stage, so a step
    of m micro-batches takes (m + p - 1) / p times a step of one (whose p slots are one
    micro-batch's trip through every stage), optimizer aside; the stages' micro-batch compute sums
    back to the one-GPU pass, and the optimizer's longest stage holds at least 1/p of it."""
    cfg, hw = load_model("llama-2-7b"), load_hardware("h100")
    run = RunSpec("train", 4096, 1)
    whole = roofline(cfg, run, hw)
    optimizer = whole.components["optimizer"].time_s
    for p in (2, 4, 8):
        one = step(cfg, run.replace(layout=Layout(pp=p, micro_batches=1)), hw)
        for m in (2, 3, 16):
            many = step(cfg, run.replace(layout=Layout(pp=p, micro_batches=m)), hw)
            assert many.time_s - many.optimizer_s == pytest.approx((one.time_s - one.optimizer_s) * (m + p - 1) / p)
            assert many.bubble_s / (many.time_s - many.optimizer_s) == pytest.approx((p - 1) / (m + p - 1))
        assert sum(one.compute_s) == pytest.approx(whole.time_s - optimizer)
        assert optimizer / p <= one.optimizer_s < optimizer


def test_communication_time_is_bytes_over_the_link():
    """tp within a node goes over NVLink (450 GB/s on the H100): Megatron's 4 all-reduces of
    s x h per layer, the embedding's and the LM head's, the cross-entropy's; dp across nodes over
    InfiniBand (50 GB/s per GPU), ZeRO-1's gradients and weights once per step, the ideal hiding all
    it can of them behind the last backward (the gradients) and the next forward (the weights): one
    micro-batch's compute."""
    cfg, hw = load_model("llama-2-7b"), load_hardware("h100")
    run = RunSpec("train", 4096, 1)
    t, L, S, h, b = 8, 32, 4096, 4096, 2
    ring = 2 * (t - 1) / t
    tp = step(cfg, run.replace(layout=Layout(tp=t)), hw)
    assert tp.communication_s == pytest.approx(ring * ((4 * L + 2) * S * h * b + 3 * S * 4) / 450e9)
    dp = step(cfg, run.replace(layout=Layout(dp=16, zero=1)), hw)
    P = 6_738_415_616  # Llama 2 7B's published count (Meta)
    assert dp.drain_comm_s == pytest.approx(2 * 15 * 2 * P / 16 / 50e9 - dp.compute_s[0])


def test_a_link_the_hardware_lacks_exits_2(run, config_file):
    spec = config_file("name: box\ndescription: no network\nmemory: 80GB\nmemory_bandwidth: 3TB/s\n"
                       "peak_flops: {bf16: 900TFLOP/s, fp32: 60TFLOP/s}\nsource: test\n"
                       "interconnect: {intra_node: 100GB/s, gpus_per_node: 4}\n", "box.yaml")
    result = run("time", "llama-2-7b", "--hardware", spec, "--seq", "1024", "--dp", "8")
    assert (result.exit_code, result.stderr) == (2, f"Error: {spec}:7: key 'interconnect.inter_node': box gives no "
                                                    "inter-node bandwidth, needed for dp over 8 GPUs (4 a node)\n")


def test_time_with_a_layout_matches_plan_and_memory(run):
    """The plan's best layout, timed and sized by `time` and `memory` with the same options."""
    result = run("plan", "llama-3.1-70b", "--gpus", "64", "--hardware", "h100", "--seq", "8192",
                 "--global-batch", "512", "--all", "--json")
    assert result.exit_code == 0, result.output
    layouts = json.loads(result.stdout)["layouts"]
    fitting = [r for r in layouts if r["fits"]]
    assert fitting and [r["expected"]["step_s"] for r in fitting] == sorted(r["expected"]["step_s"] for r in fitting)
    assert all(r["memory"] <= 80 * 10**9 for r in fitting)
    assert all("step_s" not in r and r["memory"] > 80 * 10**9 for r in layouts if not r["fits"])
    best = fitting[0]
    lay = best["layout"]
    opts = ["--seq", "8192", "--batch", str(best["micro_batch"]), "--tp", str(lay["tp"]), "--cp", str(lay["cp"]),
            "--pp", str(lay["pp"]),
            "--dp", str(lay["dp"]), "--zero", str(lay["zero"]), "--global-batch", "512",
            *(["--sp"] if lay["sp"] else []), "--recompute", best["recompute"]]
    timed = json.loads(run("time", "llama-3.1-70b", "--hardware", "h100", *opts, "--json").stdout)
    assert timed["time_s"] == best["step_s"] and timed["expected"]["time_s"] == best["expected"]["step_s"]
    assert timed["expected"]["mfu"] == best["expected"]["mfu"] and timed["utilization"]["mfu"] == best["mfu"]
    sized = json.loads(run("memory", "llama-3.1-70b", *opts, "--json").stdout)
    assert sized["total"] == best["memory"]


@pytest.mark.parametrize("args, code, message", [
    (["llama-2-7b", "--gpus", "0", "--hardware", "h100", "--global-batch", "8"], 2,
     "Invalid value for '--gpus': must be >= 1, got 0"),
    (["llama-2-7b", "--gpus", "8", "--hardware", "h100", "--global-batch", "8", "--seq", "1,2"], 2,
     "Invalid value for '--seq': expects a whole number such as 4096 or 128k, got '1,2'"),
    (["llama-3.1-405b", "--gpus", "1", "--hardware", "l4", "--global-batch", "1", "--seq", "1024"], 0,
     "no layout fits in 22.35 GiB: more GPUs, a shorter --seq or a smaller --global-batch"),
    # a dense MLP beside the experts is sized on one GPU only: more GPUs would be refused
    (["gemma-4-26b-a4b", "--gpus", "1", "--hardware", "h100", "--global-batch", "8", "--seq", "131072"], 0,
     "no layout fits in 74.51 GiB: a shorter --seq or a smaller --global-batch"),
    (["gemma-3-27b-it", "--gpus", "1", "--hardware", "h100", "--global-batch", "8", "--seq", "8192"], 0,
     "no layout fits in 74.51 GiB: more GPUs, a shorter --seq or a smaller --global-batch"),
    (["gpt2-small", "--gpus", "1048576", "--hardware", "h100", "--global-batch", "8"], 0,
     "no valid layout of 1,048,576 GPUs for gpt2-small"),
])
def test_plan_usage(run, args, code, message):
    result = run("plan", *args)
    assert message in result.output and result.exit_code == code, result.output


def test_plan_lists_no_layout_and_says_why(run):
    """JSON and CSV list the layouts that fit: with none, the table's reason goes to stderr."""
    args = ("plan", "llama-3.1-405b", "--gpus", "1", "--hardware", "l4", "--global-batch", "1", "--seq", "1024")
    for fmt in ("json", "csv"):
        result = run(*args, "--format", fmt)
        assert (result.exit_code, result.stderr) == (0, "Warning: no layout fits in 22.35 GiB: more GPUs, a shorter "
                                                        "--seq or a smaller --global-batch\n")
    assert json.loads(run(*args, "--json").stdout)["layouts"] == []


def test_time_json_keeps_its_keys_with_a_layout(run):
    """DESIGN.md section 8's keys describe the slowest stage's compute over the step."""
    data = json.loads(run("time", "llama-2-7b", "--hardware", "h100", "--seq", "4096", "--tp", "2", "--pp", "2",
                          "--json").stdout)
    assert data["flops"] == sum(c["flops"] for c in data["components"].values())
    assert data["bound"] in ("compute", "memory")
    assert sum(c["time_s"] for c in data["components"].values()) == pytest.approx(data["parts_s"]["compute"])


def test_chunked_prefill_takes_no_layout(run):
    result = run("time", "gpt2-small", "--hardware", "h100", "--mode", "prefill", "--tp", "2", "--chunk", "16")
    assert result.exit_code == 2 and "--chunk (chunked prefill) runs on one GPU" in result.output


@pytest.mark.parametrize("layout", [("--pp", "2"), ("--tp", "2", "--dp", "2")])
def test_generate_runs_on_one_tensor_parallel_group_or_data_parallel_gpus(run, layout):
    result = run("time", "llama-2-7b", "--hardware", "h100", "--mode", "generate", "--prompt", "10", "--new", "2",
                 *layout)
    assert result.exit_code == 2 and "generate runs on one tensor-parallel group" in result.output


# --- context parallelism -------------------------------------------------------------------------

def test_context_parallel_splits_each_sequence():
    """A GPU of a cp group keeps the activations of S/cp tokens: with flash attention over full
    layers everything it saves is per token but the RoPE tables (per position, S x hd x 2) and the
    loss's fp32 scalar, so cp GPUs together keep one GPU's activations plus cp - 1 more scalars."""
    cfg, S, c, scalar = load_model("llama-2-7b"), 8192, 4, 4
    whole = memory(cfg, RunSpec("train", S, 1)).parts
    split = memory(cfg, RunSpec("train", S, 1, layout=Layout(cp=c))).parts
    assert c * (split["activations"] + split["logits"]) == whole["activations"] + whole["logits"] + (c - 1) * scalar


def test_context_parallel_ranks_are_zero_replicas():
    """ZeRO shards over the dp x cp GPUs that hold the same parameters: dp 2 x cp 4 at ZeRO-3 is
    16P/8, as dp 8 is."""
    result = memory(load_model("llama-2-7b"), RunSpec("train", 4096, 1, layout=Layout(dp=2, cp=4, zero=3))).parts
    assert result["weights"] + result["gradients"] + result["optimizer"] == 13_476_831_232


def test_context_parallel_ring_sends_kv():
    """Ring attention: per layer, cp - 1 sends of the local tokens' K and V in forward and twice
    that in backward (K/V again, and their gradients)."""
    cfg, S, c, L, kv, b = load_model("llama-2-7b"), 8192, 4, 32, 2 * 4096, 2
    ring = [x for x in collectives(cfg, RunSpec("train", S, 1, layout=Layout(cp=c)), 0) if x.group == "cp"]
    assert sum(x.sent for x in ring) == 3 * (c - 1) * L * (S // c) * kv * b
    # a sliding window of W reaches back over ceil(W / (S/c)) chunks only: Mistral's 4,096 at 32k over 8
    mistral, S2, c2 = load_model("mistral-7b"), 32768, 8
    ring2 = [x for x in collectives(mistral, RunSpec("train", S2, 1, layout=Layout(cp=c2)), 0) if x.group == "cp"]
    assert sum(x.sent for x in ring2) == 3 * 1 * L * (S2 // c2) * (2 * 1024) * b
    grads = [x for x in collectives(cfg, RunSpec("train", S, 1, layout=Layout(cp=c)), 0) if x.group == "dp"]
    P = 6_738_415_616  # Llama 2 7B's published count (Meta)
    assert sum(x.sent for x in grads) == 2 * (c - 1) * 2 * P // c  # gradients all-reduced over the cp ranks


@pytest.mark.parametrize("args, message", [
    (["--cp", "3", "--seq", "4096"], "cp 3 splits each sequence into 6 chunks (Megatron's load balancing of causal "
                                     "attention), which must divide the 4,096 tokens of a sequence"),
    (["--cp", "2", "--attention", "eager"], "context parallelism runs ring flash attention"),
    (["--cp", "2", "--tp", "8", "--sp", "--seq", "4104"],
     "--sp (sequence parallelism) needs tp 8 to divide the 2,052 tokens of a sequence on a GPU"),
])
def test_context_parallel_rules(run, args, message):
    result = run("memory", "llama-2-7b", *args)
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize("args", [["--mode", "decode", "--seq", "4096", "--cp", "2"],
                                  ["--mode", "decode", "--seq", "4096", "--tp", "2", "--sp"],
                                  ["--mode", "generate", "--prompt", "511", "--new", "2", "--tp", "2", "--sp"]])
def test_decode_cannot_split_its_token(run, args):
    """Context and sequence parallelism split a sequence's new tokens: a decode step has one, which no
    prompt length changes (generate names the decode steps' rule before the prompt's)."""
    result = run("time", "llama-2-7b", "--hardware", "h100", *args)
    assert result.exit_code == 2 and "a decode step has one" in result.output, result.output


def test_plan_considers_context_parallelism_for_long_sequences(run):
    data = json.loads(run("plan", "llama-3.1-8b", "--gpus", "16", "--hardware", "h100", "--seq", "65536",
                          "--global-batch", "16", "--all", "--json").stdout)
    cps = {r["layout"]["cp"] for r in data["layouts"] if r["fits"]}
    assert cps > {1} and all(65536 // cp >= 4096 for cp in cps)
