"""Training activations: the analytic bytes equal what autograd saves in the reference model."""

import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings, strategies as st

from llmcalc.analysis.activations import activation_bytes, korthikanti_bytes
from llmcalc.analysis.config import bundled_names, from_dict, load_bundled
from llmcalc.analysis.verify.measure import build, measure_saved_bytes
from llmcalc.analysis.verify.norms import RMSNorm
from tests.strategies import valid_configs
from tests.strategies import CONFIGS

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _measured(cfg, batch, seq, attention, dtype, recompute=False):
    model = build(cfg, attention, dtype=DTYPES[dtype], recompute=recompute)
    saved = measure_saved_bytes(model, torch.zeros(batch, seq, dtype=torch.long, device="meta"))
    total = saved.pop("total")
    return saved, total


def _check(cfg, batch, seq, attention, dtype, recompute=False):
    analytic = activation_bytes(cfg, batch, seq, attention, dtype, recompute)
    measured, total = _measured(cfg, batch, seq, attention, dtype, recompute)
    assert analytic.components == measured
    assert analytic.total == total


@pytest.mark.parametrize("name", bundled_names())
@pytest.mark.parametrize("attention", ["eager", "flash"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_bundled(name, attention, dtype):
    _check(load_bundled(name).replace(n_layers=2), 2, 16, attention, dtype)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("recompute", [False, True])
def test_variants_fp16(name, recompute):
    for attention in ("eager", "flash"):
        _check(CONFIGS[name], 1, 9, attention, "fp16", recompute)


@settings(max_examples=80, deadline=None)
@given(valid_configs(), st.integers(1, 3), st.integers(1, 12), st.sampled_from(["eager", "flash"]),
       st.sampled_from(list(DTYPES)), st.booleans())
def test_random_configs(raw, batch, seq, attention, dtype, recompute):
    cfg = from_dict(raw)
    _check(cfg, batch, min(seq, cfg.context_length), attention, dtype, recompute)


def test_per_layer_times_layers():
    cfg = CONFIGS["llama"]
    acts = activation_bytes(cfg, 2, 8, "eager", "bf16")
    assert acts.components["mlp/up"] == cfg.n_layers * acts.per_layer["mlp/up"]
    assert acts.loss == 2 * 8 * cfg.vocab_size * 2 + 2  # bf16 log-softmax and a scalar


def test_attention_scaling_with_seq():
    """Eager keeps the S x S softmax output (4x when S doubles); flash keeps no S x S term."""
    cfg = load_bundled("gpt2-small")
    eager = [activation_bytes(cfg, 1, s, "eager").components["attention"] for s in (512, 1024)]
    flash = [activation_bytes(cfg, 1, s, "flash").components["attention/sdpa"] for s in (512, 1024)]
    assert eager[1] == 4 * eager[0]
    assert flash[1] == 2 * flash[0]


def test_korthikanti_relation():
    """GPT-2 in 16 bits with eager attention: Korthikanti's 34sbh + 5as^2b minus the dropout
    masks and outputs they count (2sbh and 3as^2b), plus the fp32 LayerNorm statistics."""
    cfg, b, s = load_bundled("gpt2-small"), 2, 1024
    ours = sum(activation_bytes(cfg, b, s, "eager", "bf16").per_layer.values())
    T, a = b * s, cfg.n_heads
    assert ours == korthikanti_bytes(cfg, b, s) - 2 * T * cfg.d_model - 3 * a * s * s * b + 16 * T


def test_recompute_keeps_block_inputs():
    cfg = CONFIGS["gpt"]
    acts = activation_bytes(cfg, 2, 8, "flash", "bf16", recompute=True)
    assert acts.per_layer == {"layer": 2 * 8 * cfg.d_model * 2}


def test_bad_arguments():
    with pytest.raises(ValueError):
        activation_bytes(CONFIGS["gpt"], 1, 8, "sdpa")
    with pytest.raises(ValueError):
        activation_bytes(CONFIGS["gpt"], 1, 8, dtype="int8")


def test_recompute_gives_the_same_gradients():
    cfg = CONFIGS["neox"]
    tokens = torch.randint(0, cfg.vocab_size, (2, 7))
    grads = []
    for recompute in (False, True):
        torch.manual_seed(0)
        model = build(cfg, "eager", device="cpu", dtype=torch.float64, recompute=recompute)
        torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten()).backward()
        grads.append([p.grad for p in model.parameters()])
    assert all(torch.allclose(a, b) for a, b in zip(*grads))


def test_rmsnorm_matches_torch():
    norm = RMSNorm(6).double()
    with torch.no_grad():
        norm.weight.add_(torch.randn(6, dtype=torch.float64))
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    ref = torch.nn.RMSNorm(6, eps=1e-5).double()
    ref.weight.data.copy_(norm.weight.data)
    assert torch.allclose(norm(x), ref(x))
    assert torch.autograd.gradcheck(lambda x, w: norm(x), (x, norm.weight))


def test_activations_never_import_torch():
    code = "import sys, llmcalc.analysis.activations; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
