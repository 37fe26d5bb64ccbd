"""Per-GPU memory under parallel layouts (analysis.parallel, DESIGN.md section 9): closed forms
written here from the published parameter count and the Megatron/ZeRO conventions, and sums over
the GPUs of a layout back to the unsharded figures."""

import json

import pytest

from llmcalc.analysis.cluster.memory import memory
from llmcalc.analysis.count.activations import activation_bytes
from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.kvcache import kv_cache
from llmcalc.analysis.errors import SpecError
from llmcalc.analysis.load.catalog import load_bundled
from llmcalc.analysis.perf.hardware import load_hardware
from llmcalc.analysis.perf.roofline import roofline
from llmcalc.analysis.spec import Layout, RunSpec

pytestmark = pytest.mark.unit

P_LLAMA2_7B = 6_738_415_616  # Meta's published count


def _state_bytes(report):
    return report.parts["weights"] + report.parts["gradients"] + report.parts["optimizer"]


def test_zero3_over_8_gpus_is_16_bytes_per_parameter_over_8(run):
    data = json.loads(run("memory", "llama-2-7b", "--mode", "train", "--zero", "3", "--dp", "8", "--seq",
                          "4096", "--json").stdout)
    assert data["weights"] + data["gradients"] + data["optimizer"] == 16 * P_LLAMA2_7B // 8 == 13_476_831_232
    assert (data["gpus"], data["layout"]["dp"], data["layout"]["zero"]) == (8, 8, 3)


@pytest.mark.parametrize("zero, closed_form", [
    (0, lambda P, d: 2 * P + 2 * P + 12 * P),
    (1, lambda P, d: 2 * P + 2 * P + 12 * P // d),
    (2, lambda P, d: 2 * P + 2 * P // d + 12 * P // d),
    (3, lambda P, d: 16 * P // d),
])
def test_zero_stages(zero, closed_form):
    m = memory(load_bundled("llama-2-7b"), RunSpec("train", 4096, 1, layout=Layout(dp=8, zero=zero)))
    assert _state_bytes(m) == closed_form(P_LLAMA2_7B, 8)


def test_tp8_weights_follow_megatron(run):
    V, d, f, L = 32_000, 4096, 11_008, 32
    sharded = 2 * V * d + L * (4 * d * d + 3 * d * f)  # embedding, head, q k v o, up gate down
    replicated = L * 2 * d + d  # two RMSNorms per layer and the final one
    data = json.loads(run("memory", "llama-2-7b", "--mode", "train", "--tp", "8", "--seq", "4096",
                          "--json").stdout)
    assert data["weights"] == 2 * (sharded // 8 + replicated) == 1_685_069_824


def test_kv_cache_per_gpu_when_tp_exceeds_the_kv_heads():
    cfg = load_bundled("mistral-7b")  # 32 heads, 8 KV heads of 128, 32 layers
    for tp, heads in ((4, 2), (8, 1), (16, 1), (32, 1)):  # past 8 each GPU keeps one head, replicated
        m = memory(cfg, RunSpec("prefill", 4096, 2, layout=Layout(tp=tp)))
        assert m.parts["kv_cache"] == 2 * 32 * 2 * 4096 * heads * 128 * 2  # K and V, layers, batch, bf16


def test_mla_latent_is_replicated_over_tp():
    cfg = load_bundled("deepseek-v3")
    one = memory(cfg, RunSpec("prefill", 1024, 1)).parts["kv_cache"]
    assert memory(cfg, RunSpec("prefill", 1024, 1, layout=Layout(tp=8))).parts["kv_cache"] == one


@pytest.mark.parametrize("tp, sp", [(1, False), (2, False), (4, False), (4, True), (12, True)])
def test_gpt2_activations_under_tp_match_korthikanti(tp, sp):
    """Korthikanti et al. 2022: sbh(10 + 24/t + 5as/(ht)) with TP, sbh(34/t + 5as/(ht)) with SP.
    Without dropout (llmcalc's convention, activations.py) the 2 sbh of masks and 3 as^2b of
    attention dropout go, and LayerNorm keeps 8 bytes of fp32 statistics per row: replicated
    8 sbh + 16 sb (norm inputs, q/k/v and MLP inputs), sharded 24 sbh + 2 as^2b."""
    cfg = load_bundled("gpt2-small")
    s, B, h, a, L = 768, 2, 768, 12, 12  # tp divides s: sequence parallelism splits it
    m = memory(cfg, RunSpec("train", s, B, "eager", layout=Layout(tp=tp, sp=sp)))
    per_layer = (8 * s * B * h + 16 * s * B) // (tp if sp else 1) + (24 * s * B * h + 2 * a * s * s * B) // tp
    residual = (2 * s * B * h + 8 * s * B) + 2 * s * B * h  # final LayerNorm, LM head input
    once = 8 * s * B + 8 * s + residual // (tp if sp else 1)  # token ids, position ids
    assert m.parts["activations"] == L * per_layer + once


def test_pipeline_stages_hold_their_layers_and_1f1b_micro_batches():
    cfg = load_bundled("llama-2-7b")
    V, d, f, s = 32_000, 4096, 11_008, 2048
    run = RunSpec("train", s, 1)
    per_layer = sum(activation_bytes(cfg, run).groups[0][1].values())
    rope = 2 * s * 128 * 2  # cos and sin tables, saved by each stage's first layer
    m = memory(cfg, run.replace(layout=Layout(pp=4)))
    assert (m.stage, m.parts["activations"]) == (0, 4 * (8 * per_layer + 8 * s + rope))  # 4 micro-batches
    assert m.parts["weights"] == 2 * (V * d + 8 * (4 * d * d + 3 * d * f + 2 * d))
    last = memory(cfg, run.replace(layout=Layout(pp=4, micro_batches=2)))
    assert len(last.stage_totals) == 4 and last.stage_totals[0] > last.stage_totals[1]


@pytest.mark.parametrize("args, message", [
    (["llama-2-7b", "--tp", "3"], "--tp 3 must divide the 32 attention heads of llama-2-7b"),
    (["mistral-7b", "--tp", "16", "--pp", "3"],
     "--pp 3 must divide the 32 layers of mistral-7b"),
    (["llama-2-7b", "--ep", "2", "--dp", "2"],
     "--ep 2 needs a mixture-of-experts model, and llama-2-7b has no experts"),
    (["mixtral-8x7b", "--ep", "3", "--dp", "3"],
     "--ep 3 must divide the 8 experts of mixtral-8x7b"),
    (["mixtral-8x7b", "--ep", "2"],
     "--ep 2 must divide dp (1): experts are dealt over data-parallel GPUs"),
    (["llama-2-7b", "--sp"], "--sp (sequence parallelism) splits activations over tp: it needs tp > 1"),
    (["llama-2-7b", "--tp", "4", "--sp", "--seq", "1001"],
     "--sp (sequence parallelism) needs tp 4 to divide the 1,001 tokens of a sequence"),
    (["llama-2-7b", "--zero", "4"], "Invalid value for '--zero': 4 is not in the range 0<=x<=3."),
    (["llama-2-7b", "--tp", "8", "--gpus", "16"], "--gpus 16 must equal tp x cp x pp x dp = 8"),
    (["llama-2-7b", "--dp", "2", "--batch", "3", "--global-batch", "8"],
     "--global-batch 8 must be a multiple of batch x dp (3 x 2)"),
    (["llama-2-7b", "--tp", "0"], "Invalid value for '--tp': must be >= 1, got 0"),
])
def test_invalid_layouts_exit_2_with_the_rule(run, args, message):
    result = run("memory", *args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"Error: {message}\n")


# -- every analytic function honours the layout or refuses it -----------------------------------------

@pytest.mark.parametrize("function", [count_flops, kv_cache, activation_bytes])
@pytest.mark.parametrize("layout", [Layout(tp=8), Layout(pp=4), Layout(dp=2), Layout(cp=2)])
def test_one_replica_functions_refuse_a_layout(function, layout):
    """count_flops, kv_cache and activation_bytes give one model replica's figures: a layout is
    refused, naming the field, never answered with single-GPU figures."""
    cfg, mode = load_bundled("llama-3.1-70b"), "decode" if function is kv_cache else "train"
    run = RunSpec(mode, 4096, 1, layout=layout)
    with pytest.raises(SpecError) as raised:
        function(cfg, run)
    assert raised.value.field == "layout" and function.__name__ in str(raised.value)


def test_roofline_refuses_a_layout_and_memory_is_per_gpu():
    cfg, hw = load_bundled("llama-3.1-70b"), load_hardware("h100")
    run = RunSpec("train", 4096, 1, layout=Layout(tp=8))
    with pytest.raises(SpecError, match="runs one model replica on one GPU"):
        roofline(cfg, run, hw)
    one, eight = memory(cfg, run.replace(layout=Layout())), memory(cfg, run)
    # TP splits every weight matrix but the norms: each GPU holds about an eighth of the weights
    assert one.parts["weights"] // 8 < eight.parts["weights"] < one.parts["weights"] // 7


@pytest.mark.unit
@pytest.mark.parametrize("dp", [8, 64])
def test_stacked_experts_shard_over_more_gpus_than_experts(dp):
    """Mixtral's 8 stacked experts over 64 GPUs: ZeRO gives each GPU 1/64 of every tensor (the
    experts split on their second dimension, as torchtitan places them), not one whole expert as
    a split on the first would, and a ZeRO-1 step's ring reduce-scatter and all-gather each send
    (dp - 1)/dp of the bf16 weights, however many GPUs: the published 46,702,792,704 parameters."""
    from llmcalc.analysis.cluster.sharding import gpu_state
    from llmcalc.analysis.cluster.step import step

    total = 46_702_792_704
    cfg = load_bundled("mixtral-8x7b")
    assert gpu_state(cfg, Layout(dp=dp, zero=3), 0).weights == total // dp
    layout = Layout.of(1, 1, dp, 1, 1, False, 1, 128, 1, None, "train")
    st = step(cfg, RunSpec("train", 4096, 1, "flash", layout=layout), load_hardware("h100"))
    assert [c.sent for c in st.collectives] == [2 * total * (dp - 1) // dp] * 2
