"""Training activations: the analytic bytes equal what autograd saves in the reference model."""

import subprocess
import sys

import pytest
import torch

from llmcalc.analysis.count.activations import activation_bytes, korthikanti_bytes
from llmcalc.analysis.errors import SpecError
from llmcalc.analysis.load.catalog import bundled_names, load_bundled
from llmcalc.analysis.spec import RunSpec, recompute_refusal
from llmcalc.analysis.verify.measure import build, measure_saved_bytes, training_loss
from llmcalc.analysis.verify.norms import LayerNorm, RMSNorm
from tests.strategies import CONFIGS

pytestmark = pytest.mark.reference

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _measured(cfg, batch, seq, attention, dtype, recompute="none", model=None):
    """What autograd saves in a training step of ``model`` (built from ``cfg`` when not given: a model
    measured again saves the same)."""
    if model is None:
        model = build(cfg, attention, dtype=DTYPES[dtype], recompute=recompute)
    saved = measure_saved_bytes(model, torch.zeros(batch, seq, dtype=torch.long, device="meta"))
    total = saved.pop("total")
    return saved, total


def _acts(cfg, batch, seq, attention="flash", dtype="bf16", recompute="none"):
    return activation_bytes(cfg, RunSpec("train", seq, batch, attention, recompute=recompute, dtype=dtype))


def _check(cfg, batch, seq, attention, dtype, recompute="none", model=None):
    analytic = _acts(cfg, batch, seq, attention, dtype, recompute)
    measured, total = _measured(cfg, batch, seq, attention, dtype, recompute, model)
    assert analytic.components == measured
    assert analytic.total == total


@pytest.mark.parametrize("name", bundled_names())
@pytest.mark.parametrize("attention", ["eager", "flash"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_bundled(name, attention, dtype):
    cfg = load_bundled(name)
    layers = 2 if cfg.moe is None else max(2, cfg.moe.first_dense_layers + 1)  # a MoE layer kept
    if cfg.position in ("rope", "alibi", "relative"):  # positions act in attention: an attention layer kept
        types = cfg.layer_types or ("full",)
        layers = max(layers, next(i + 1 for i, t in enumerate(types) if t in ("full", "sliding", "chunked")))
    _check(cfg.replace(n_layers=layers), 2, 16, attention, dtype)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("recompute", ["none", "selective", "op", "full"])
def test_variants_fp16(name, recompute):
    # refused: no per-op policy for their matmuls (op), or K/V read across checkpoints (full, kv_shared_layers)
    if recompute_refusal(CONFIGS[name], recompute) is not None:
        with pytest.raises(SpecError, match="not modeled"):
            _acts(CONFIGS[name], 1, 9, recompute=recompute)
        return
    for attention in ("eager", "flash"):
        model = build(CONFIGS[name], attention, dtype=torch.float16, recompute=recompute)
        for batch, seq in ((1, 9), (2, 7), (3, 1)):  # B = 1 and S = 1 keep some views uncopied
            _check(CONFIGS[name], batch, seq, attention, "fp16", recompute, model)


def test_groups_times_counts():
    cfg = CONFIGS["llama"]
    acts = _acts(cfg, 2, 8, "eager")
    (group, per_layer), = acts.groups
    assert group.count == cfg.n_layers
    assert acts.components["mlp/up"] == cfg.n_layers * per_layer["mlp/up"]
    assert acts.loss == 2 * 8 * cfg.vocab_size * 4 + 4  # fp32 log-softmax and scalar, though the run is bf16


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_loss_keeps_an_fp32_log_softmax(dtype):
    """The reference's loss upcasts the logits as transformers, torchtitan and Megatron-LM do: whatever the
    compute dtype, autograd keeps the fp32 log-softmax over T x V logits and nll_loss's fp32 total weight."""
    cfg = CONFIGS["llama"]
    measured, _ = _measured(cfg, 2, 8, "flash", dtype)
    assert measured["loss"] == 2 * 8 * cfg.vocab_size * 4 + 4
    assert _acts(cfg, 2, 8, dtype=dtype).loss == measured["loss"]


def test_mixed_layers_sum_over_groups():
    """DeepSeek: one dense layer and two MoE layers, each group its own bytes."""
    cfg = CONFIGS["deepseek"]
    acts = _acts(cfg, 1, 8)
    (dense, d_bytes), (moe, m_bytes) = acts.groups
    assert (dense.count, moe.count) == (1, 2) and "mlp/up" in d_bytes and "moe/experts" in m_bytes
    assert acts.components["moe/experts"] == 2 * m_bytes["moe/experts"]
    assert acts.components["attention/kv_b"] == 3 * d_bytes["attention/kv_b"]


def test_sliding_and_full_layers_keep_one_mask_each():
    """Flash keeps the additive mask of the sliding layers only (full layers use the causal
    flag); when the window does not bind (W >= S) no mask is kept."""
    cfg = CONFIGS["gemma2"]  # W = 4
    S = 8
    bound = _acts(cfg, 1, S).components["attention/sdpa"]
    free = _acts(cfg.replace(sliding_window=S), 1, S).components["attention/sdpa"]
    assert bound - free == S * S * 2


def test_sinks_and_softcap_eager_bytes():
    """Eager: softmax over one extra sink column; soft-capping keeps tanh's output."""
    B, S = 1, 8
    base = CONFIGS["llama"]
    plain = _acts(base, B, S, "eager").components["attention"]
    sinks = _acts(base.replace(attention_sinks=True), B, S, "eager").components["attention"]
    capped = _acts(base.replace(attn_logit_softcap=30.0), B, S, "eager").components["attention"]
    h, L = base.n_heads, base.n_layers
    assert sinks - plain == L * B * h * S * 2
    assert capped - plain == L * B * h * S * S * 2


@pytest.mark.parametrize("attention", ["eager", "flash"])
@pytest.mark.parametrize("batch, seq", [(1, 8), (2, 8), (2, 1)])
def test_attention_gate_bytes(attention, batch, seq):
    """The output gate keeps sigmoid's output and the gated product (o's input), T*h*hd values each;
    the multiply's other factor, the merged heads, is what o kept without it."""
    base = CONFIGS["llama"]
    plain, gated = (_acts(c, batch, seq, attention).total for c in (base, base.replace(attention_gate=True)))
    assert gated - plain == base.n_layers * 2 * batch * seq * base.n_heads * base.head_size * 2
    _check(base.replace(attention_gate=True), batch, seq, attention, "bf16")

@pytest.mark.parametrize("norm, stats", [("layernorm", 8), ("rmsnorm", 4)])
def test_embedding_norm_keeps_its_input_and_statistics(norm, stats):
    """The norm over the embeddings keeps its input (B*S*d values) and fp32 statistics per token."""
    B, S = 2, 8
    base = CONFIGS["llama"].replace(norm=norm)
    plain, normed = (_acts(base.replace(embedding_norm=on), B, S).total for on in (False, True))
    assert normed - plain == B * S * (base.d_model * 2 + stats)

@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_sub_norms_keep_their_outputs_and_statistics(attention):
    """BitNet's sub-norms: each keeps its input (what o and down kept without it) and fp32 statistics
    per token, and o and down keep the norms' outputs, T*h*hd and T*d_ff values."""
    B, S = 2, 8
    base = CONFIGS["llama"]  # RMSNorm: one fp32 statistic per row
    plain, normed = (_acts(base.replace(sub_norms=on), B, S, attention).total for on in (False, True))
    assert normed - plain == base.n_layers * B * S * ((base.q_width + base.d_ff) * 2 + 2 * 4)
    _check(base.replace(sub_norms=True), B, S, attention, "bf16")


def test_attention_scaling_with_seq():
    """Eager keeps the S x S softmax output (4x when S doubles); flash keeps no S x S term."""
    cfg = load_bundled("gpt2-small")
    eager = [_acts(cfg, 1, s, "eager").components["attention"] for s in (512, 1024)]
    flash = [_acts(cfg, 1, s, "flash").components["attention/sdpa"] for s in (512, 1024)]
    assert eager[1] == 4 * eager[0]
    assert flash[1] == 2 * flash[0]


def test_korthikanti_relation():
    """GPT-2 in 16 bits with eager attention: Korthikanti's 34sbh + 5as^2b minus the dropout
    masks and outputs they count (2sbh and 3as^2b), plus the fp32 LayerNorm statistics."""
    cfg, b, s = load_bundled("gpt2-small"), 2, 1024
    (_, per_layer), = _acts(cfg, b, s, "eager", "bf16").groups
    T, a = b * s, cfg.n_heads
    assert sum(per_layer.values()) == korthikanti_bytes(cfg, b, s) - 2 * T * cfg.d_model - 3 * a * s * s * b + 16 * T


def test_recompute_keeps_block_inputs():
    cfg = CONFIGS["gpt"]
    acts = _acts(cfg, 2, 8, "flash", "bf16", recompute="full")
    assert [per_layer for _, per_layer in acts.groups] == [{"layer": 2 * 8 * cfg.d_model * 2}]


def test_op_keeps_every_other_linear_and_the_flash_kernel():
    """Llama under per-op checkpointing (torchtitan's Llama 3 recipe): a block keeps its input, the
    outputs of q, v, up and down (the 1st, 3rd, 5th and 7th of q, k, v, o, up, gate, down) and flash's
    output and fp32 log-sum-exp; the checkpoint the RoPE tables, once."""
    cfg = CONFIGS["llama"]
    B, S, b = 2, 8, 2
    T, d, h, hd = B * S, cfg.d_model, cfg.n_heads, cfg.head_size
    acts = _acts(cfg, B, S, "flash", "bf16", recompute="op")
    assert [per_layer for _, per_layer in acts.groups] == [{
        "layer": T * d * b, "attention/q/output": T * h * hd * b, "attention/v/output": T * cfg.kv_width * b,
        "mlp/up/output": T * cfg.d_ff * b, "mlp/down/output": T * d * b, "attention/sdpa": T * h * (hd * b + 4)}]
    # the checkpoint keeps what full recomputation's does: the blocks' inputs, the RoPE tables and masks
    for attention in ("flash", "eager"):
        op = _acts(cfg, B, S, attention, "bf16", recompute="op")
        assert op.components["layer"] == _acts(cfg, B, S, attention, "bf16", recompute="full").components["layer"]
    assert "attention/sdpa" not in op.groups[0][1]  # eager: the core reruns, nothing of it is kept


def test_op_keeps_nothing_of_fp8_matmuls():
    """torchao's _scaled_mm is off torchtitan's list: with fp8 matmuls no linear's output is kept."""
    cfg = load_bundled("llama-3.1-8b").replace(n_layers=2)
    per_layer = activation_bytes(cfg, RunSpec("train", 16, 2, recompute="op", dtype="fp8")).groups[0][1]
    assert set(per_layer) == {"layer", "attention/sdpa"}


def test_bad_arguments():
    with pytest.raises(ValueError):
        _acts(CONFIGS["gpt"], 1, 8, "sdpa")
    with pytest.raises(ValueError):
        _acts(CONFIGS["gpt"], 1, 8, dtype="int8")


def test_recompute_gives_the_same_gradients():
    cfg = CONFIGS["neox"]
    tokens = torch.randint(0, cfg.vocab_size, (2, 7))
    grads = []
    for recompute in ("none", "selective", "op", "full"):
        torch.manual_seed(0)
        model = build(cfg, "eager", device="cpu", dtype=torch.float64, recompute=recompute)
        training_loss(model(tokens), tokens).backward()
        grads.append([p.grad for p in model.parameters()])
    for other in grads[1:]:
        assert all(torch.allclose(a, b) for a, b in zip(grads[0], other))


@pytest.mark.parametrize("name", ["neox", "gpt-oss", "deepseek"])  # the aten flash kernel, sinks, MLA
def test_op_gives_the_same_gradients_with_flash(name):
    """Per-op checkpointing keeps the flash kernel's outputs (the aten kernel's, reference_flash's) and
    recomputes the rest: the gradients are those of no recomputation."""
    cfg = CONFIGS[name]
    tokens = torch.randint(0, cfg.vocab_size, (2, 7))
    grads = []
    for recompute in ("none", "op"):
        torch.manual_seed(0)
        model = build(cfg, "flash", device="cpu", dtype=torch.float64, recompute=recompute)
        training_loss(model(tokens), tokens).backward()
        grads.append([p.grad for p in model.parameters()])
    assert all((a is None and b is None) or torch.allclose(a, b) for a, b in zip(*grads))


def test_rmsnorm_matches_torch():
    norm = RMSNorm(6).double()
    with torch.no_grad():
        norm.weight.add_(torch.randn(6, dtype=torch.float64))
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    ref = torch.nn.RMSNorm(6, eps=1e-5).double()
    ref.weight.data.copy_(norm.weight.data)
    assert torch.allclose(norm(x), ref(x))
    assert torch.autograd.gradcheck(lambda x, w: norm(x), (x, norm.weight))


def test_layernorm_without_weight_matches_torch():
    x = torch.randn(3, 5, dtype=torch.float64)
    for weight, bias in ((False, False), (False, True), (True, False)):
        norm = LayerNorm(5, weight, bias).double()
        ref = torch.nn.functional.layer_norm(x, (5,), norm.weight, norm.bias, 1e-5)
        assert torch.equal(norm(x), ref) and len(list(norm.parameters())) == weight + bias


def test_activations_never_import_torch():
    code = "import sys, llmcalc.analysis.count.activations; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
