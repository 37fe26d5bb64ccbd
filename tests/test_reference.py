"""The torch reference model against the analytic counts, and its own correctness."""

import pytest
import torch

from llmcalc.analysis.config import bundled_names, from_dict, load_bundled
from llmcalc.analysis.params import count_params
from llmcalc.analysis.verify.cache import KVCache
from llmcalc.analysis.verify.checks import CHECKS, check_rope_relative
from tests.strategies import CONFIGS
from llmcalc.analysis.verify.measure import (_storage_id, build, component_key, measure_flops,
                                     measure_kv_bytes, measure_params, measure_saved_bytes)



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
        factor = {"eager": 2, "flash": 2.5}[attention]  # flash recomputes the scores
        for key, flops in fwd.items():
            attn = key in ("attention/scores", "attention/values")
            assert bwd[key] == (factor if attn else 2) * flops, (attention, key)


def test_moe_flops_follow_token_slots():
    cfg = CONFIGS["moe"]
    B, S, d, f, T = 2, 7, cfg.d_model, cfg.expert_width, 14
    fwd, bwd = measure_flops(build(cfg), torch.zeros(B, S, dtype=torch.long, device="meta"))
    L = cfg.n_layers
    assert fwd["moe/router"] == 2 * T * d * 4 * L
    assert fwd["moe/experts"] == 2 * T * 2 * d * f * 2 * L  # k=2 slots, up and down
    assert fwd["moe/shared_experts"] == 2 * T * d * f * 2 * L
    assert bwd["moe/experts"] == 2 * fwd["moe/experts"]


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
    assert cache.size == 5
    assert cache.past_positions(7).tolist() == [5, 6, 2, 3, 4]  # slot s holds p with p % 5 == s


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("check", ["cached decode", "rolling buffer", "chunked prefill", "gqa"])
@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_real_tensor_checks(name, check, attention):
    ok, diff = CHECKS[check](CONFIGS[name], attention)
    assert ok, diff


@pytest.mark.parametrize("name", CONFIGS)
def test_eager_equals_flash(name):
    ok, diff = CHECKS["eager == flash"](CONFIGS[name])
    assert ok, diff


def test_rope_relative():
    ok, diff = check_rope_relative(CONFIGS["llama"])
    assert ok, diff


def test_window_binds():
    """The window mask changes the logits (so the rolling-buffer check is not vacuous)."""
    cfg = CONFIGS["llama"]
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float64)
    tokens = torch.randint(0, cfg.vocab_size, (1, 12))
    windowed = model(tokens)
    model.cfg = cfg.replace(sliding_window=None)
    assert (windowed - model(tokens)).abs().max() > 1e-6
