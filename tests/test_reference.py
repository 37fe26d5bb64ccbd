"""The torch reference model against the analytic counts, and its own correctness."""

import dataclasses

import pytest
import torch

import llmcalc.analysis.verify.report as report
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.load.catalog import bundled_names, load_bundled
from llmcalc.analysis.model.layers import layer_specs
from llmcalc.analysis.verify.attention import reference_flash, repeat_kv
from llmcalc.analysis.verify.cache import KVCache
from llmcalc.analysis.verify.checks import CHECKS, applicable, check_rope_relative, small_config
from llmcalc.analysis.verify.ffn import MoE
from llmcalc.analysis.verify.measure import (
    _storage_id,
    build,
    component_key,
    measure_flops,
    measure_kv_bytes,
    measure_params,
    measure_saved_bytes,
)
from tests.strategies import BASE, CONFIGS, from_dict

pytestmark = pytest.mark.reference

NEW_VARIANTS = ["gemma2", "deepseek", "deepseek-lite", "gpt-oss", "qwen2-moe", "olmo2", "olmo",
                "neox-partial", "smollm3", "opt"]


def _expected(cfg):
    return {k: v for k, v in count_params(cfg).components.items() if v}


@pytest.mark.parametrize("name", bundled_names())
def test_params_bundled(name):
    cfg = load_bundled(name)
    assert measure_params(build(cfg)) == _expected(cfg)


@pytest.mark.parametrize("name", CONFIGS)
def test_params_variants(name):
    cfg = CONFIGS[name]
    assert measure_params(build(cfg)) == _expected(cfg)


def test_tied_head_is_the_token_embedding():
    model = build(CONFIGS["gpt"])
    assert model.lm_head.weight is model.embedding["token"].weight


def test_component_key():
    assert component_key("layers.3.attention.q") == "attention/q"
    assert component_key("layers.0.moe.experts") == "moe/experts"
    assert component_key("norm.final") == "norm/final"
    assert component_key("embedding.token") == "embedding/token"


def test_gpt2_small_forward_flops():
    L, per_layer = 12, {"attention/q": 1_207_959_552, "attention/k": 1_207_959_552,
                        "attention/v": 1_207_959_552, "attention/o": 1_207_959_552,
                        "attention/scores": 1_610_612_736, "attention/values": 1_610_612_736,
                        "mlp/up": 4_831_838_208, "mlp/down": 4_831_838_208}
    assert sum(per_layer["attention/" + k] for k in "qkv") == 3_623_878_656
    expected = {k: v * L for k, v in per_layer.items()} | {"lm_head": 79_047_426_048}
    tokens = torch.zeros(1, 1024, dtype=torch.long, device="meta")
    for attention in ("eager", "flash"):
        fwd, bwd = measure_flops(build(load_bundled("gpt2-small"), attention), tokens)
        assert fwd == expected
        assert sum(fwd.values()) == 291_648_307_200
        for key, flops in fwd.items():  # flash recomputes the scores: 2.5x over both families
            factor = 3 if attention == "flash" and key == "attention/scores" else 2
            assert bwd[key] == factor * flops, (attention, key)


def test_moe_flops_follow_token_slots():
    cfg = CONFIGS["moe"]
    B, S, d, f, T = 2, 7, cfg.d_model, cfg.expert_width, 14
    fwd, bwd = measure_flops(build(cfg), torch.zeros(B, S, dtype=torch.long, device="meta"))
    L = cfg.n_layers
    assert fwd["moe/router"] == 2 * T * d * 4 * L
    assert fwd["moe/experts"] == 2 * T * 2 * d * f * 2 * L  # k=2 slots, up and down
    assert fwd["moe/shared_experts"] == 2 * T * d * f * 2 * L
    assert bwd["moe/experts"] == 2 * fwd["moe/experts"]


def _five_experts(name):
    """5 experts top-2: 28 token slots deal 6, 6, 6, 5, 5 (two batched groups); 2 slots, 1, 1, 0, 0, 0."""
    cfg = CONFIGS[name]
    return cfg.replace(moe=dataclasses.replace(cfg.moe, num_experts=5, experts_per_token=2))


@pytest.mark.parametrize("name", ["deepseek", "gpt-oss"])  # shared expert; biased router and experts
@pytest.mark.parametrize("batch, seq", [(2, 7), (1, 1)])
def test_balanced_batches_compute_each_expert(name, batch, seq):
    """The batched balanced path equals each token's weighted sum over its k experts, written out
    here one expert at a time: slot s = (token s // k, choice s % k) goes to expert s % E."""
    cfg = _five_experts(name)
    torch.manual_seed(0)
    moe = MoE(cfg, routing="balanced").double()
    with torch.no_grad():
        for p in moe.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(batch, seq, cfg.d_model, dtype=torch.float64)
    ex, E, k = moe.experts, 5, 2

    def expert(h, e):
        def lin(h, name):
            b = getattr(ex, name + "_bias")
            return h @ getattr(ex, name)[e] + (0 if b is None else b[e])
        return lin(torch.nn.functional.silu(lin(h, "gate")) * lin(h, "up"), "down")

    flat = x.reshape(-1, cfg.d_model)
    probs = moe.router(flat).softmax(-1)
    want = []
    for t, h in enumerate(flat):
        ids = [(t * k + j) % E for j in range(k)]
        w = probs[t, ids] / probs[t, ids].sum()
        want.append(sum(w[j] * expert(h, e) for j, e in enumerate(ids)))
    want = torch.stack(want)
    if cfg.moe.shared_experts:
        se = moe.shared_experts
        want = want + (torch.nn.functional.silu(flat @ se.gate[0]) * (flat @ se.up[0])) @ se.down[0]
    torch.testing.assert_close(moe(x).reshape(-1, cfg.d_model), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["moe", "gpt-oss", "qwen2-moe", "deepseek"])
def test_true_topk_counts_what_balanced_counts(name):
    """On real tensors the data-dependent top-k loop and the batched balanced path run the same
    matmul FLOPs and save the same bytes for backward, component by component."""
    cfg = _five_experts(name)
    tokens = torch.randint(0, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    topk, balanced = (build(cfg, device="cpu", routing=r) for r in ("topk", "balanced"))
    assert measure_flops(topk, tokens) == measure_flops(balanced, tokens)
    assert measure_saved_bytes(topk, tokens) == measure_saved_bytes(balanced, tokens)


def test_mixtral_on_meta():  # its time is measured by benchmarks/verify.py, not here
    cfg = load_bundled("mixtral-8x7b")
    model = build(cfg, dtype=torch.bfloat16)
    assert measure_params(model) == _expected(cfg)
    fwd, _ = measure_flops(model, torch.zeros(1, 128, dtype=torch.long, device="meta"))
    assert fwd["moe/experts"] == 2 * 128 * 2 * cfg.d_model * cfg.d_ff * 3 * cfg.n_layers


def test_storage_identity_dedups_views_on_meta():
    x = torch.empty(4, 6, device="meta")
    assert _storage_id(x) == _storage_id(x.t()) == _storage_id(x[1:]) != _storage_id(x.clone())


@pytest.mark.parametrize("name", ["llama", "neox", "moe"])
@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_saved_bytes_meta_equals_cpu(name, attention):
    """Shapes decide the saved bytes: meta measures what cpu saves (LayerNorm aside: its
    cpu kernel keeps mean/rstd in the input dtype, meta in fp32, so use rmsnorm/fp32)."""
    cfg = CONFIGS[name]
    tokens = torch.zeros(2, 9, dtype=torch.long)
    meta = measure_saved_bytes(build(cfg, attention, routing="balanced"), tokens.to("meta"))
    cpu = measure_saved_bytes(build(cfg, attention, device="cpu", routing="balanced"), tokens)
    assert meta == cpu and meta["total"] > 0


def test_saved_bytes_exclude_parameters():
    cfg = CONFIGS["gpt"]
    saved = measure_saved_bytes(build(cfg), torch.zeros(1, 8, dtype=torch.long, device="meta"))
    L, B, S, f, h = cfg.n_layers, 1, 8, cfg.d_ff, cfg.n_heads
    assert saved["mlp/down"] == L * B * S * f * 4  # the gelu output, not the weight
    assert saved["attention/values"] == L * B * h * S * cfg.head_size * 4  # v; probs are attention's


@pytest.mark.parametrize("window", [None, 6])
def test_kv_bytes(window):
    cfg = CONFIGS["llama"].replace(sliding_window=window)
    got = measure_kv_bytes(build(cfg, dtype=torch.float16), batch=3, prefill=10, decode=4)
    cached = min(14, window or 14)
    assert got == 2 * cfg.n_layers * 3 * cfg.kv_heads * cfg.head_size * cached * 2


def test_rolling_cache_slots():
    cache = KVCache(CONFIGS["llama"], 1, 100, device="meta")
    assert cache.sizes == [5, 5]
    # slot s holds p with p % 5 == s; a chunk reads every filled slot
    assert cache.past_positions(7, 5, chunk=2).tolist() == [5, 6, 2, 3, 4]
    # a decode step at 7 sees 3..7: position 2 (slot 2) is not read, 4 keys + itself = the window
    assert cache.past_positions(7, 5, chunk=1).tolist() == [5, 6, 3, 4]
    assert cache.past_positions(7, None, chunk=1).tolist() == list(range(7))


def test_cache_sized_per_layer_window():
    """Gemma 2: sliding layers hold min(tokens, W) slots, full layers every token."""
    cfg = CONFIGS["gemma2"]  # [sliding, full], W = 4
    cache = KVCache(cfg, 2, 10, device="meta")
    assert cache.sizes == [4, 10]
    got = measure_kv_bytes(build(cfg), batch=2, prefill=7, decode=3)
    assert got == 2 * 2 * cfg.kv_heads * cfg.head_size * (4 + 10) * 4


@pytest.mark.parametrize("name", ["deepseek", "deepseek-lite"])
def test_mla_cache_holds_latent_and_rope_key(name):
    cfg = CONFIGS[name]
    m, specs = cfg.mla, layer_specs(cfg)
    cache = KVCache(cfg, 3, 10, device="meta")
    assert [tuple(t.shape) for t in cache.tensors[0]] == [(3, cache.sizes[0], m.kv_lora_rank),
                                                          (3, 1, cache.sizes[0], m.qk_rope_head_dim)]
    got = measure_kv_bytes(build(cfg, dtype=torch.float16), batch=3, prefill=6, decode=4)
    slots = sum(min(10, s.window or 10) for s in specs)
    assert got == 3 * slots * (m.kv_lora_rank + m.qk_rope_head_dim) * 2


@pytest.mark.parametrize("name", [n for n, c in CONFIGS.items() if c.attention == "mla"])
def test_mla_decode_flops_equal_the_reference(name):
    """Prefill and decode matmul FLOPs per key, eager and flash, below and past every window: the reference
    decompresses in a prefill and under eager attention and runs a flash decode step absorbed, as the analytic
    count says (DSA's top-k, sinks, the output gate and recurrent layers beside included)."""
    from llmcalc.analysis.verify.report import inference_flop_checks

    checks = inference_flop_checks(CONFIGS[name], "meta", 2)
    assert checks and not [c for c in checks if not c.ok]


# MLA has no K/V head groups: the GQA check applies to mha only
@pytest.mark.parametrize("name, check", [(n, c) for n in CONFIGS
                                         for c in ("cached decode", "rolling buffer", "chunked prefill", "gqa")
                                         if c != "gqa" or CONFIGS[n].attention == "mha"])
@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_real_tensor_checks(name, check, attention):
    ok, diff = CHECKS[check](CONFIGS[name], attention)
    assert ok, diff


@pytest.mark.parametrize("name", CONFIGS)
def test_eager_equals_flash(name):
    ok, diff = CHECKS["eager == flash"](CONFIGS[name])
    assert ok, diff


@pytest.mark.parametrize("name", CONFIGS)
def test_flash_gradients_equal_eager(name):
    ok, diff = CHECKS["flash gradients"](CONFIGS[name])
    assert ok, diff


@pytest.mark.parametrize("name", ["llama", "neox-partial", "deepseek", "smollm3"])
def test_rope_relative(name):
    ok, diff = check_rope_relative(CONFIGS[name])
    assert ok, diff


def test_window_binds():
    """The window mask changes the logits (so the rolling-buffer check is not vacuous)."""
    cfg = CONFIGS["llama"]
    tokens = torch.randint(0, cfg.vocab_size, (1, 12))
    logits = []
    for window in (5, None):
        torch.manual_seed(0)
        logits.append(build(cfg.replace(sliding_window=window), device="cpu", dtype=torch.float64)(tokens))
    assert (logits[0] - logits[1]).abs().max() > 1e-6


def _flash_inputs(B=2, h=4, g=2, S=5, d_qk=6, d_v=3, causal_bias=True):
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=gen, requires_grad=True)

    q, k, v, sinks = rand(B, h, S, d_qk), rand(B, g, S, d_qk), rand(B, g, S, d_v), rand(h)
    window = torch.arange(S)[:, None] - torch.arange(S)[None, :]
    bias = torch.zeros(S, S, dtype=torch.float64).masked_fill((window < 0) | (window >= 3), float("-inf"))
    return q, k, v, sinks, (bias[None, None] if causal_bias else None)


@pytest.mark.parametrize("cap", [None, 1.5])
@pytest.mark.parametrize("with_sinks", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_reference_flash_gradcheck(cap, with_sinks, with_bias):
    """Analytic backward (recomputed scores, sinks, soft-cap, GQA, d_v != d_qk) == numerical, along
    random directions (gradcheck's fast mode: one Jacobian-vector product per input, where the full
    Jacobian perturbs each of the ~500 input elements in turn; a wrong gradient still fails it)."""
    q, k, v, sinks, bias = _flash_inputs(causal_bias=with_bias)
    sinks = sinks if with_sinks else None

    def f(q, k, v, sinks):
        return reference_flash(q, k, v, bias, sinks, 0.4, cap, bias is None)

    assert torch.autograd.gradcheck(f, (q, k, v, sinks), fast_mode=True)


def test_reference_flash_equals_eager_with_sinks_and_softcap():
    q, k, v, sinks, bias = _flash_inputs()
    scores = torch.tanh(q @ repeat_kv(k, 2).transpose(-2, -1) * 0.4 / 1.5) * 1.5 + bias
    logits = torch.cat([scores, sinks.view(1, 4, 1, 1).expand(2, 4, 5, 1)], -1)
    eager = logits.softmax(-1)[..., :-1] @ repeat_kv(v, 2)
    flash = reference_flash(q, k, v, bias, sinks, 0.4, 1.5, False)
    assert torch.allclose(eager, flash)


def test_reference_flash_flop_counts():
    """2 matmuls forward, 5 backward: 2.5x, scores 3x and values 2x, as the aten kernel."""
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v, sinks, bias = _flash_inputs()
    with FlopCounterMode(display=False) as fwd:
        out = reference_flash(q, k, v, bias, sinks, 0.4, 1.5, False)
    with FlopCounterMode(display=False) as bwd:
        out.sum().backward()
    pairs = 2 * 2 * 4 * 5 * 5  # 2 * B * h * S * S_kv
    assert fwd.get_total_flops() == pairs * (6 + 3)
    assert bwd.get_total_flops() == pairs * (3 * 6 + 2 * 3)


@pytest.mark.parametrize("name", NEW_VARIANTS)
def test_new_variants_analytic_equals_measured(name):
    """Params, forward/backward FLOPs (eager/flash, recompute), saved bytes, KV bytes."""
    cfg = CONFIGS[name]
    checks = report.param_checks(cfg) + report.kv_checks(cfg, "meta", 2)
    for attention in ("eager", "flash"):
        for recompute in report.recomputations(attention, cfg):
            checks += report.training_checks(cfg, 7, 2, attention, recompute, "meta")
    failed = [c for c in checks if not c.ok]
    assert not failed, failed


def test_variant_structure():
    """Each new key reaches the reference modules."""
    gemma = build(CONFIGS["gemma2"])
    assert hasattr(gemma, "logit_softcap") and gemma.layers[0].attention.cap == 50.0
    oss = build(CONFIGS["gpt-oss"])
    assert oss.layers[0].attention.sinks.shape == (4,)
    assert oss.layers[0].moe.router.bias is not None and oss.layers[0].moe.experts.up_bias is not None
    qwen = build(CONFIGS["qwen2-moe"])
    assert hasattr(qwen.layers[0], "mlp") and hasattr(qwen.layers[1].moe, "shared_expert_gate")
    deepseek = build(CONFIGS["deepseek"])
    assert hasattr(deepseek.layers[0], "mlp") and hasattr(deepseek.layers[1], "moe")
    assert {"q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b", "o"} <= set(
        dict(deepseek.layers[0].attention.named_children()))
    olmo = build(CONFIGS["olmo"])
    assert not list(olmo.layers[0].norm.parameters())
    olmo2 = build(CONFIGS["olmo2"])
    assert set(olmo2.layers[0].norm) == {"attention_post", "mlp_post"}
    assert olmo2.layers[0].attention.q_norm.weight.shape == (CONFIGS["olmo2"].q_width,)
    assert [s.rope for s in build(CONFIGS["smollm3"]).specs] == [True, True, True, False]


def test_nope_layer_does_not_rotate():
    """rope_layers reaches the blocks: the same weights with RoPE on every layer and on none
    give different logits."""
    cfg = CONFIGS["smollm3"]
    tokens = torch.randint(0, cfg.vocab_size, (1, 6))
    outs = []
    for rope_layers in ([True], [False]):
        torch.manual_seed(0)
        outs.append(build(cfg.replace(rope_layers=tuple(rope_layers)), device="cpu", dtype=torch.float64)(tokens))
    assert (outs[0] - outs[1]).abs().max() > 1e-6


@pytest.mark.parametrize("name", list(CONFIGS) + ["mixtral-8x7b"])
def test_small_config_keeps_structure(name):
    cfg = CONFIGS.get(name) or load_bundled(name)
    small = small_config(cfg)
    kinds = {(s.window is None, s.rope, s.ffn, s.attention) for s in layer_specs(small)}
    orig = {(s.window is None, s.rope, s.ffn, s.attention) for s in layer_specs(cfg)}
    assert kinds == orig
    assert small.d_model == 32 and set(applicable(cfg)) == set(applicable(small))


# -- xIELU (Apertus) ---------------------------------------------------------------------------

def test_xielu_gradcheck():
    """The hand-written backward of the fused xIELU function == numerical, for the input and all
    four scalars, on both sides of 0 and of eps."""
    from llmcalc.analysis.verify.ffn import XIELU, XIELUFunction

    torch.manual_seed(0)
    x = (torch.randn(6, 7, dtype=torch.float64) * 2).requires_grad_()
    act = XIELU().double()
    assert torch.autograd.gradcheck(XIELUFunction.apply, (x, act.alpha_p, act.alpha_n, act.beta, act.eps))


def test_xielu_equals_transformers():
    """The reference xIELU computes transformers' XIELUActivation (its Python path), value and
    gradients, from the same initial scalars; its state dict holds the same four names."""
    from transformers.activations import XIELUActivation

    from llmcalc.analysis.verify.ffn import XIELU

    torch.manual_seed(0)
    x = (torch.randn(5, 9, dtype=torch.float64) * 3).requires_grad_()
    theirs = XIELUActivation(dtype=torch.float64)
    ours = XIELU()
    with torch.no_grad():
        for name in ("alpha_p", "alpha_n", "beta", "eps"):
            getattr(ours, name).copy_(getattr(theirs, name).float())
    ours = ours.double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    y_theirs, y_ours = theirs(x), ours(x)
    torch.testing.assert_close(y_ours, y_theirs)
    g = torch.randn_like(y_ours)
    grads_theirs = torch.autograd.grad(y_theirs, (x, theirs.alpha_p, theirs.alpha_n), g)
    grads_ours = torch.autograd.grad(y_ours, (x, ours.alpha_p, ours.alpha_n), g)
    for a, b in zip(grads_ours, grads_theirs):
        torch.testing.assert_close(a, b)


def test_xielu_saves_its_input_only():
    """The MLP's xIELU keeps its input (the up projection's output) under mlp/act; its scalars
    are parameters (not activations)."""
    cfg = CONFIGS["apertus"]
    B, S = 2, 3
    saved = measure_saved_bytes(build(cfg), torch.zeros(B, S, dtype=torch.long, device="meta"))
    assert saved["mlp/act"] == cfg.n_layers * B * S * cfg.d_ff * 4  # fp32
    assert measure_params(build(cfg))["mlp/act"] == cfg.n_layers * 4


def test_position_offset_table_has_the_offset_rows():
    """position_offset (OPT, BioGPT): a table of context_length + offset rows (its figures against the
    reference: test_new_variants_analytic_equals_measured[opt])."""
    cfg = CONFIGS["opt"]
    assert build(cfg).embedding["position"].weight.shape == (cfg.context_length + 2, cfg.d_model)


def test_position_offset_rows_are_read_by_no_position():
    """Position i reads row i + position_offset: the rows before it change no logit, the last row
    changes the last position's."""
    cfg = CONFIGS["opt"]
    torch.manual_seed(0)
    model = build(cfg, device="cpu").double()
    tokens = torch.randint(0, cfg.vocab_size, (1, cfg.context_length))
    before = model(tokens)
    with torch.no_grad():
        model.embedding["position"].weight[:2] += torch.randn(2, cfg.d_model, dtype=torch.float64)
    torch.testing.assert_close(model(tokens), before)
    with torch.no_grad():
        model.embedding["position"].weight[-1] += torch.randn(cfg.d_model, dtype=torch.float64)
    assert not torch.allclose(model(tokens)[0, -1], before[0, -1])


# -- hyper-connections (DeepSeek V4, Hy4) ------------------------------------------------------------

@pytest.mark.parametrize("mix, head", [(True, False), (False, False), (False, True)])
def test_hyper_coefficients_gradcheck(mix, head):
    """The hand-written backward of the fused coefficient function (the two matmuls, the recomputed
    activations and Sinkhorn's iterations) == numerical, for the streams and all three parameters."""
    from llmcalc.analysis.verify.hyper import _Coefficients

    torch.manual_seed(0)
    n, d = 3, 4
    rows = n if head else (2 + n) * n if mix else 2 * n
    x = torch.randn(2, 5, n, d, dtype=torch.float64, requires_grad=True)
    fn = torch.randn(rows, n * d, dtype=torch.float64, requires_grad=True)
    base = torch.randn(rows, dtype=torch.float64, requires_grad=True)
    scale = torch.rand(1 if head else 3 if mix else 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: _Coefficients.apply(*a, mix, 4, head), (x, fn, base, scale))


def test_hyper_connection_equals_transformers():
    """The reference's coefficients, collapse and mix compute transformers' DeepseekV4HyperConnection and
    the layer's stream update (post * y + comb^T X), from the same parameters."""
    import transformers
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4HyperConnection

    from llmcalc.analysis.model.checks import from_dict
    from llmcalc.analysis.verify.hyper import HyperConnection, Mix

    d, n = 8, 3
    config = transformers.DeepseekV4Config(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=5, rms_norm_eps=1e-5)
    theirs = DeepseekV4HyperConnection(config).double()
    cfg = from_dict({**BASE, "d_model": d, "norm": "rmsnorm", "hyper": {"streams": n, "sinkhorn_iters": 5}})
    ours = HyperConnection(cfg).double()
    torch.manual_seed(0)
    with torch.no_grad():
        for name in ("fn", "base", "scale"):
            getattr(theirs, name).copy_(torch.randn_like(getattr(theirs, name)))
            getattr(ours, name).copy_(getattr(theirs, name))
    x, y = torch.randn(2, 5, n, d, dtype=torch.float64), torch.randn(2, 5, d, dtype=torch.float64)
    post, comb, collapsed = theirs(x)
    ours_collapsed, ours_post, ours_comb = ours(x)
    close = dict(rtol=1e-5, atol=1e-5)  # transformers computes the coefficients in fp32
    torch.testing.assert_close(ours_collapsed, collapsed, **close)
    torch.testing.assert_close(Mix()(ours_post, ours_comb, y, x),
                               post.unsqueeze(-1) * y.unsqueeze(-2) + comb.transpose(-1, -2) @ x, **close)


@pytest.mark.parametrize("flash", [False, True])
@pytest.mark.parametrize("with_sinks", [False, True])
def test_sparse_core_gradcheck(flash, with_sinks):
    """DSA's sparse core: its hand-written backward (eager, or flash recomputing the scores; with sink
    logits, Hy4's) == numerical, over each query's top-3 causal keys (fewer for the first queries)."""
    from llmcalc.analysis.verify.attention import SparseCore

    gen = torch.Generator().manual_seed(0)
    B, h, S, K = 2, 3, 6, 3
    q, k = (torch.randn(B, h, S, 5, dtype=torch.float64, generator=gen, requires_grad=True) for _ in range(2))
    v = torch.randn(B, h, S, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    sinks = torch.randn(h, dtype=torch.float64, generator=gen, requires_grad=True) if with_sinks else None
    allowed = torch.ones(S, S, dtype=torch.bool).tril()
    index = torch.randn(B, S, S, generator=gen).masked_fill(~allowed, float("-inf"))
    idx = index.sort(dim=-1, descending=True, stable=True).indices[..., :K].contiguous()
    valid = allowed.expand(B, S, S).gather(-1, idx)

    def f(q, k, v, sinks):
        return SparseCore.apply(q, k, v, idx, valid, sinks, flash, 5 ** -0.5)

    assert torch.autograd.gradcheck(f, (q, k, v, sinks))


@pytest.mark.parametrize("position,rotary", [("none", 1.0), ("rope", 1.0), ("rope", 0.5)])
@pytest.mark.parametrize("heads,kv_heads", [(2, 2), (2, 1), (4, 2)])
@pytest.mark.parametrize("batch", [1, 2])
def test_kv_sharing_saves_what_the_reference_saves(position, rotary, heads, kv_heads, batch):
    """A layer reusing K/V (kv_shared_layers) saves copies of them where eager's matmuls copy them and nothing
    where they read the source's storages (analysis.model.attention.eager_kv_copies): every layout of K and V
    (RoPE none, whole, partial; K/V heads expanded or not; one sequence or two), eager, selective and flash."""
    raw = {"position": position, "norm": "rmsnorm", "activation": "swiglu", "n_layers": 3, "n_heads": heads,
           "n_kv_heads": kv_heads, "head_dim": 8, "d_model": 16, "sliding_window": 3,
           "layer_types": ["sliding", "full"], "kv_shared_layers": 1}
    if position == "rope":
        raw["rotary_fraction"] = rotary
    cfg = from_dict({**BASE, **raw})
    checks = [c for attention, recompute in (("eager", "none"), ("eager", "selective"), ("flash", "none"))
              for c in report.training_checks(cfg, 5, batch, attention, recompute, "meta")]
    assert checks and all(c.ok for c in checks), [c for c in checks if not c.ok]


@pytest.mark.parametrize("batch", [1, 2])
def test_a_gate_multiplies_a_view_of_one_wide_heads(batch):
    """Flash's output laid out heads-first, (B, h, S, 1): its merged heads (B, S, h) are a view that the output
    gate's multiply keeps, where the o projection's (B*S, h) matrix would need a copy (hypothesis found it)."""
    cfg = from_dict({**BASE, "position": "rope", "norm": "rmsnorm", "activation": "relu", "n_layers": 1, "n_heads": 2,
                     "attention": "mla", "attention_gate": True,
                     "mla": {"kv_lora_rank": 1, "qk_nope_head_dim": 1, "qk_rope_head_dim": 2, "v_head_dim": 1}})
    checks = report.training_checks(cfg, 2, batch, "flash", "none", "meta")
    assert checks and all(c.ok for c in checks), [c for c in checks if not c.ok]
