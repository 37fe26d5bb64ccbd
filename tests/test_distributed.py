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

from llmcalc.analysis.comm import collectives
from llmcalc.analysis.config import from_dict, load_model
from llmcalc.analysis.params import count_params
from llmcalc.analysis.run import Layout, RunSpec
from llmcalc.analysis.verify.distributed import check_layout_on_torch, unsupported

from .strategies import BASE, VARIANTS


def test_gpt2_small_tp2_dp2_zero3_passes_against_torch_distributed(run):
    result = run("verify", "gpt2-small", "--tp", "2", "--dp", "2", "--zero", "3", "--seq", "32", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    checks = {c["name"]: c for c in record["checks"]}
    assert all(c["ok"] for c in checks.values())
    assert record["gpus"] == 4 and record["layout"]["tp"] == 2
    # what torch measured, against closed forms: Megatron's 2 all-reduces per layer forward and 2
    # backward, the vocab-parallel embedding and LM head one each, the cross-entropy's 3 (fp32 per
    # token); FSDP2 gathers 12 layers + the root forward, the 12 layers again backward
    L, B, S, d = 12, 2, 32, 768
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
])
def test_dense_layouts_match_torch(cfg, layout):
    checks = check_layout_on_torch(cfg, layout, 16, 2)
    assert [c for c in checks if not c.ok] == []
    assert any(c.name.startswith("comm/") for c in checks)


@given(variant=st.sampled_from(sorted(VARIANTS)), tp=st.sampled_from([1, 2]), dp=st.integers(1, 3))
@settings(max_examples=25, deadline=None)
def test_random_variants_match_torch(variant, tp, dp):
    """Every variant FSDP2 can shard (all of them), with TP where DTensor's plans apply."""
    cfg = from_dict({**BASE, **VARIANTS[variant]})
    layout = Layout(tp=tp, dp=dp, zero=3 if dp > 1 else 0)
    if layout.trivial or unsupported(cfg, layout) or cfg.n_heads % tp:
        layout = Layout(dp=2, zero=3)
    checks = check_layout_on_torch(cfg, layout, 8, 2)
    assert [c for c in checks if not c.ok] == []


@pytest.mark.parametrize("args, message", [
    (["gpt2-small", "--pp", "2"], "pipeline, expert and sequence parallelism are checked on the formulas only"),
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
    all-gathers; full recomputation adds the 2 forward ones again."""
    cfg = load_model("llama-3.1-70b")
    t, L, h, b = 8, 80, 8192, 2  # bf16
    per_layer = 4 * 2 * (t - 1) * TOKENS * h * b // t
    ends = 2 * 2 * (t - 1) * TOKENS * h * b // t + 3 * 2 * (t - 1) * TOKENS * 4 // t  # embedding, head, loss
    assert sent(cfg, Layout(tp=t)) == L * per_layer + ends
    # sp: the embedding's partial sums are reduce-scattered into the sequence shards (half an
    # all-reduce); the LM head all-gathers its input and reduce-scatters its gradient
    ends_sp = 3 * (t - 1) * TOKENS * h * b // t + 3 * 2 * (t - 1) * TOKENS * 4 // t
    assert sent(cfg, Layout(tp=t, sp=True)) == L * per_layer + ends_sp
    assert sent(cfg, Layout(tp=t), recompute=True) == L * per_layer * 3 // 2 + ends


def test_data_parallel_volume_is_zeros():
    """Rajbhandari et al. (2020): data parallelism and ZeRO-1/2 move 2(d-1)/d of the gradients per
    step, ZeRO-3 3(d-1)/d (weights gathered for forward and for backward, gradients
    reduce-scattered); llama-2-7b's tensors all split evenly over 8."""
    cfg, d = load_model("llama-2-7b"), 8
    P = count_params(cfg).total
    for zero in (0, 1, 2):
        assert sent(cfg, Layout(dp=d, zero=zero)) == 2 * (d - 1) * 2 * P // d
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
