"""Per-GPU memory under parallel layouts (analysis.parallel, DESIGN.md section 9): closed forms
written here from the published parameter count and the Megatron/ZeRO conventions, and sums over
the GPUs of a layout back to the unsharded figures."""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmcalc.analysis.cluster.comm import collectives
from llmcalc.analysis.cluster.generation import generate as generate_parallel
from llmcalc.analysis.cluster.generation import one_pass, shard
from llmcalc.analysis.cluster.memory import memory
from llmcalc.analysis.cluster.pipeline import chunks, held, split
from llmcalc.analysis.cluster.sharding import REDUCE_SCATTERED, saved, stage_saves, stage_tensors, stages
from llmcalc.analysis.cluster.step import step
from llmcalc.analysis.count.activations import activation_bytes
from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.kvcache import kv_cache
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.errors import SpecError
from llmcalc.analysis.load.catalog import load_bundled, load_text
from llmcalc.analysis.perf.hardware import load_hardware
from llmcalc.analysis.perf.roofline import decode_sums, generate, roofline
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


def test_dsa_indexer_is_replicated_over_tp(run):
    """DeepSeek-V3.2's indexer is whole on every TP rank, as vLLM and SGLang build it (ReplicatedLinear wq_b,
    wk, weights_proj): its 61 x 13,959,424 parameters and its cached key of 128 per token beside MLA's 576."""
    cfg = load_bundled("deepseek-v3.2")
    indexer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128  # wq_b, wk, weights_proj, k_norm's weight and bias
    rank = stage_tensors(cfg, Layout(tp=8), 0)
    assert sum(t.numel for t in rank if t.key.startswith("attention/indexer/")) == 61 * indexer
    kv = memory(cfg, RunSpec("decode", 4096, 2, layout=Layout(tp=8))).parts["kv_cache"]
    assert kv == 61 * 2 * 4096 * (512 + 64 + 128) * 2  # layers, batch, tokens, latent + rope key + indexer key, bf16
    refused = run("time", "deepseek-v3.2", "--hardware", "h100", "--seq", "4096", "--tp", "8", "--cp", "2")
    assert (refused.exit_code, refused.stderr) == (
        2, "Error: --cp 2: DSA's indexer (dsa) picks each query's keys among all of a sequence's, which ring "
           "attention passes around: not sized here\n")


def test_a_vision_tower_is_split_over_tp_on_the_first_stage(run):
    """Gemma 3 27B -it's SigLIP tower (27 layers of width 1,152, MLP 4,304, 16 heads; patches of 14 pixels, 896
    pixels a side) and projector (an RMSNorm, 1,152 -> 5,376) beside Gemma 3 27B's language model: at tp 2 its
    layers split as vLLM shards the encoder (q, k, v, up column-parallel, o and down row-parallel with whole
    biases), the rest whole, all on pipeline stage 0."""
    d, f, h = 1152, 4304, 1152 // 2
    layer = 3 * (h * d + h) + (d * h + d) + (f // 2 * d + f // 2) + (d * f // 2 + d) + 2 * 2 * d
    rest = (3 * 14 * 14 * d + d) + (896 // 14) ** 2 * d + 2 * d + (d + d * 5376)  # patch, positions, norm, projector
    args = ("--mode", "inference", "--seq", "4096", "--tp", "2", "--pp", "2", "--json")
    tower = json.loads(run("memory", "gemma-3-27b-it", *args).stdout)
    text = json.loads(run("memory", "gemma-3-27b", *args).stdout)
    assert tower["stage_totals"][0] - text["stage_totals"][0] == 2 * (27 * layer + rest)  # bf16
    assert tower["stage_totals"][1] == text["stage_totals"][1]
    refused = run("memory", "gemma-3-27b-it", "--tp", "32")
    assert (refused.exit_code, refused.stderr) == (
        2, "Error: --tp 32 must divide the 16 attention heads of gemma-3-27b-it's vision tower\n")


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


@pytest.mark.parametrize("mode, seq, scores", [("prefill", 16384, 2), ("train", 8192, 1)])
def test_a_stage_of_recurrent_layers_alone_holds_no_attention_transient(mode, seq, scores):
    """Nemotron-Nano-9B-v2 over 4 stages, eager attention: a stage whose layers are all Mamba-2 or MLP layers
    holds no attention scores; a stage with an attention layer one layer's, B x heads x S x S in bf16 (twice in
    inference: the scores and their softmax; training saves the softmax as an activation)."""
    cfg = load_bundled("nemotron-nano-9b-v2")
    layout = Layout(pp=4, micro_batches=8 if mode == "train" else None)
    run = RunSpec(mode, seq, 1, "eager", dtype="bf16", layout=layout)
    kinds = [cfg.layer_types[i] for i in range(cfg.n_layers)]
    attending = [any(kinds[i] not in ("mamba2", "none") for i in layers) for layers in stages(cfg, layout)]
    assert attending.count(False) >= 2  # the first and last stages: Mamba-2 and MLP layers alone
    for s in range(4):
        part = memory(cfg, run, stage=s).parts["attention"]
        assert part == (scores * cfg.n_heads * seq * seq * 2 if attending[s] else 0), s


@pytest.mark.parametrize("model, run", [
    ("nemotron-nano-9b-v2", RunSpec("decode", 131072, 16, layout=Layout(pp=4))),
    ("nemotron-nano-9b-v2", RunSpec("train", 4096, 1, layout=Layout(pp=4, micro_batches=8))),
    ("nemotron-nano-9b-v2", RunSpec("prefill", 8192, 1, layout=Layout(pp=4))),
    ("gemma-3-27b", RunSpec("prefill", 32768, 1, layout=Layout(pp=4))),
    ("gemma-4-31b", RunSpec("train", 2048, 1, recompute="op", layout=Layout(pp=4, micro_batches=4))),
    ("deepseek-v3", RunSpec("train", 1024, 1, layout=Layout(pp=8, micro_batches=8))),
    ("deepseek-v3", RunSpec("train", 1024, 1, dtype="fp8", layout=Layout(pp=8, micro_batches=8))),
])
def test_each_stage_runs_the_components_of_its_own_layers(model, run):
    """Every stage's micro-batch (Nemotron-Nano's Mamba-2, attention and MLP layers, Gemma 3's sliding and full
    ones, Gemma 4's rerunning different linears under per-op checkpointing, DeepSeek-V3's dense first layers):
    each component's FLOPs those `flops --pp` counts on that stage layer by layer (cluster.flops.gpu_flops), not
    the stage's share of every component alike; fp8's casts the bytes of its layers' (float8.layer_casts);
    plan's bound of each stage's compute (step.stage_floors) just below it. The final norm and the LM head's bias,
    in the layers' `norm` and `bias` components, go with the stages' norms and biases."""
    from llmcalc.analysis.cluster.flops import gpu_flops
    from llmcalc.analysis.cluster.sharding import stage_keys
    from llmcalc.analysis.cluster.step import _pass, _stage_compute, fastest_ep, stage_floors
    from llmcalc.analysis.model.architecture import build
    from llmcalc.analysis.perf.calibration import Efficiency
    from llmcalc.analysis.perf.float8 import CASTS, layer_casts

    cfg, hw = load_bundled(model), load_hardware("h100")
    run = run.resolve(cfg)
    shared: dict = {}
    _, (_, parts, _, work, _) = _pass(cfg, run, hw, Efficiency(), shared)
    floors = stage_floors(cfg, run, hw, None, shared, run.layout.pp)
    for s, key in enumerate(stage_keys(cfg, run.layout.pp, 1)):
        mine, _, expected = _stage_compute(parts, work, key[2], key[0], key[1])
        counted = gpu_flops(cfg, run.executed(), s).report.total
        if CASTS in mine:  # the roofline's alone; memory-bound, split by bytes
            blocks = build(cfg).blocks
            casts = sum(n * layer_casts(blocks[i][1], run.executed())[1] for i, n in key[2])
            assert abs(mine.pop(CASTS).bytes - casts) <= 1, s
        for k, c in mine.items():
            assert abs(c.matmul_flops - counted.matmul.get(k, 0)) <= 1, (s, k)  # scaled in floats, rounded
            if k not in ("norm", "bias"):
                assert abs(c.elementwise_flops - counted.elementwise.get(k, 0)) <= 1, (s, k)
        assert floors[key] <= expected
        if fastest_ep(cfg) == 1:  # the bound's pass is this one
            assert floors[key] == pytest.approx(expected, rel=1e-8)


def test_under_context_parallelism_a_stage_runs_its_layers_share_of_the_whole_sequences_core():
    """Gemma 3 27B over 4 stages and 4 context-parallel GPUs: the busiest GPU's attention core (its share of the
    whole sequence's) split over the stages as the whole sequence's is, whose sliding layers' core grows with the
    sequence as the full layers' does not (`flops --pp 4` over the whole sequence), not as a GPU's S / cp tokens'
    would split it."""
    from llmcalc.analysis.cluster.flops import gpu_flops
    from llmcalc.analysis.cluster.sharding import stage_keys
    from llmcalc.analysis.cluster.step import _pass, _stage_compute
    from llmcalc.analysis.perf.calibration import Efficiency

    cfg, hw = load_bundled("gemma-3-27b"), load_hardware("h100")
    run = RunSpec("prefill", 65536, 1, layout=Layout(pp=4, cp=4)).resolve(cfg)
    _, (_, parts, _, work, _) = _pass(cfg, run, hw, Efficiency(), {})
    whole = run.replace(layout=Layout(pp=4)).executed()
    total = sum(gpu_flops(cfg, whole, s).report.total.matmul["attention/scores"] for s in range(4))
    for s, key in enumerate(stage_keys(cfg, 4, 1)):
        mine = _stage_compute(parts, work, key[2], key[0], key[1])[0]["attention/scores"].matmul_flops
        counted = gpu_flops(cfg, whole, s).report.total.matmul["attention/scores"]
        assert mine / parts["attention/scores"].matmul_flops == pytest.approx(counted / total, rel=1e-9), s


def test_a_model_whose_layers_never_attend_holds_no_attention_transient():
    """One GPU, eager attention: Mamba layers alone hold no attention scores; Zamba's Mamba layers run a shared
    transformer block, which does (one layer's scores); RG-LRU layers beside a sliding layer of window 4 decode
    with the window's 4 keys, not the recurrent layers' whole context."""
    from llmcalc.analysis.count.memory import device_memory
    from llmcalc.analysis.model.checks import from_dict
    from tests.strategies import BASE, VARIANTS

    mamba, zamba, rglru = (from_dict({**BASE, **VARIANTS[k]}) for k in ("mamba", "zamba", "rglru"))
    train = RunSpec("train", 16, 2, "eager", dtype="bf16")
    assert device_memory(mamba, train).parts["attention"] == 0
    assert device_memory(zamba, train).parts["attention"] == 2 * zamba.n_heads * 16 * 16 * 2  # B h S S, bf16
    decode = device_memory(rglru, RunSpec("decode", 60, 2, "eager", dtype="bf16"))
    assert decode.parts["attention"] == 2 * 2 * rglru.n_heads * 1 * 4 * 2  # scores and softmax: B h 1 W, bf16
    assert (decode.attention_queries, decode.attention_keys) == (1, 4)


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
    (["mistral-7b", "--tp", "16", "--pp", "33"],
     "--pp 33 must be at most the 32 layers of mistral-7b"),
    (["mistral-7b", "--pp", "16", "--vpp", "3"],
     "--vpp 3: 16 x 3 virtual stages need a layer each, and mistral-7b has 32"),
    (["mistral-7b", "--vpp", "2"], "--vpp 2 (interleaved 1F1B) splits each pipeline stage into model chunks: it "
                                   "needs pp > 1"),
    (["mistral-7b", "--pp", "4", "--vpp", "2", "--global-batch", "6"],
     "--vpp 2 (interleaved 1F1B) needs the micro-batches per step (6) to be a multiple of pp (4), as "
     "Megatron-LM's schedule does"),
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
    (["llama-2-7b", "--pp", "2", "--dp", "2", "--zero", "2"],
     "--zero 2 with 2 pipeline stages: ZeRO-2/3 shard anew each micro-batch, which pipelines do not do (DeepSpeed "
     "refuses it; torchtitan's FSDP under PP gathers a stage's weights and reduces its gradients once a step, as "
     "--zero 1 counts them)"),
    (["llama-2-7b", "--tp", "8", "--gpus", "16"], "--gpus 16 must equal tp x cp x pp x dp = 8"),
    (["llama-2-7b", "--dp", "2", "--batch", "3", "--global-batch", "8"],
     "--global-batch 8 must be a multiple of batch x dp (3 x 2)"),
    (["llama-2-7b", "--tp", "0"], "Invalid value for '--tp': must be >= 1, got 0"),
])
def test_invalid_layouts_exit_2_with_the_rule(run, args, message):
    result = run("memory", *args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"Error: {message}\n")


@pytest.mark.parametrize("command", [["memory"], ["time", "--hardware", "h100"]])
def test_zero_without_replicas_is_ignored_with_a_warning(run, command):
    warned = run(*command, "gpt2-small", "--zero", "3", "--json")
    assert (warned.exit_code, warned.stderr) == (0, "Warning: --zero 3 shards over the data-parallel GPUs (dp x cp), "
                                                    "and there is one; ignored\n")
    assert warned.stdout == run(*command, "gpt2-small", "--json").stdout


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
def test_plan_and_time_take_the_optimizer():
    """SGD keeps no moments: GPT-2 small's 124,439,808 parameters hold 8 bytes fewer each (two fp32
    moments) on every layout of plain data parallelism plan weighs, and its step reads bf16 weights and
    gradients and the fp32 master (8 bytes) and writes the weights and master (6): 14 bytes a parameter,
    not Adam's 30."""
    from llmcalc.analysis.cluster.search import candidates
    from llmcalc.analysis.perf.roofline import roofline

    cfg, hw, P = load_bundled("gpt2-small"), load_hardware("h100"), 124_439_808
    adam, sgd = ({(c.run.layout, c.run.batch, c.run.recompute): c.memory.total
                  for c in candidates(cfg, hw, 8, 1024, 64, optimizer=o)} for o in ("adam", "sgd"))
    whole = [k for k in adam if k[0].zero == 0 and k[0].tp == k[0].pp == 1]  # every GPU holds the model
    assert whole and all(adam[k] - sgd[k] == 8 * P for k in whole)
    step = roofline(cfg, RunSpec("train", 1024, 1, optimizer="sgd"), hw)
    assert step.components["optimizer"].bytes == 14 * P


P_LLAMA3_8B = 8_030_261_248  # Meta's published count


@pytest.mark.unit
def test_fp32_gradients_are_held_reduced_and_read_in_fp32():
    """--grad-dtype fp32 (Megatron-LM's --bf16 default: bf16 weights, fp32 main gradients): Llama 3 8B's
    gradients take 4 bytes a parameter on one GPU (bf16 + Adam: 2 + 4 + 4 + 8 = 18, Megatron's
    distributed-optimizer table), ZeRO-2 over dp 8 keeps an eighth of them, the data-parallel all-reduce
    (ZeRO-0) and reduce-scatters (ZeRO-1 to 3) carry 4 bytes a parameter while ZeRO's weight all-gathers
    stay bf16, and the optimizer step reads fp32 gradients: 2 x (2 + 12) + 4 = 32 bytes a parameter,
    Adam's 30 with bf16 ones. The default is the compute dtype, as before."""
    cfg, P = load_bundled("llama-3-8b"), P_LLAMA3_8B
    run = RunSpec("train", 4096, 1, grad_dtype="fp32")
    one = memory(cfg, run)
    assert (one.parts["weights"], one.parts["gradients"], one.parts["optimizer"]) == (2 * P, 4 * P, 12 * P)
    assert one.parts["gradients"] == 32_121_044_992
    assert memory(cfg, run.replace(grad_dtype=None)).parts["gradients"] == 2 * P
    assert memory(cfg, run.replace(grad_dtype="bf16")).parts["gradients"] == 2 * P
    zero2 = memory(cfg, run.replace(layout=Layout(dp=8, zero=2)))
    assert (zero2.parts["weights"], zero2.parts["gradients"], zero2.parts["optimizer"]) == (2 * P, 4 * P // 8,
                                                                                           12 * P // 8)
    assert zero2.parts["gradients"] == 4_015_130_624
    payloads = {}
    for zero in (0, 1, 2, 3):
        r = run.replace(layout=Layout(dp=8, zero=zero, micro_batches=1))
        payloads[zero] = {(c.what, c.kind): c.payload for c in collectives(cfg, r, 0)}
    assert payloads[0] == {("dp gradients", "all-reduce"): 4 * P}
    assert payloads[1] == {("zero-1 gradients", "reduce-scatter"): 4 * P, ("zero-1 weights", "all-gather"): 2 * P}
    assert payloads[2] == {("zero-2 gradients", "reduce-scatter"): 4 * P, ("zero-2 weights", "all-gather"): 2 * P}
    # ZeRO-3: each layer's unit gathered for forward and again for backward, the root unit (embedding,
    # final norm, head: 2 V d + d) once; every unit's gradients reduce-scattered once
    V, d = 128_256, 4096
    root = 2 * V * d + d
    assert payloads[3] == {("zero-3 weights", "all-gather"): 2 * (2 * P - root),
                           ("zero-3 gradients", "reduce-scatter"): 4 * P}
    hw = load_hardware("h100")
    assert roofline(cfg, run, hw).components["optimizer"].bytes == 32 * P == 256_968_359_936
    assert roofline(cfg, run.replace(grad_dtype=None), hw).components["optimizer"].bytes == 30 * P


@pytest.mark.unit
def test_a_tied_embedding_reduces_its_gradient_in_the_gradient_dtype():
    """GPT-2 small's tied embedding over two pipeline stages: the ends all-reduce its 50,257 x 768 gradient,
    4 bytes a value with fp32 gradients."""
    cfg = load_bundled("gpt2-small")
    for grad, size in ((None, 2), ("fp32", 4)):
        run = RunSpec("train", 1024, 1, grad_dtype=grad, layout=Layout(pp=2))
        (tied,) = [c for c in collectives(cfg, run, 0) if c.what == "tied embedding gradient"]
        assert tied.payload == 50_257 * 768 * size


@pytest.mark.unit
def test_plan_takes_the_gradient_dtype():
    """plan's layouts of plain data parallelism (every GPU holds the whole model and its gradients) hold 2
    bytes more a parameter with fp32 gradients: GPT-2 small's 124,439,808."""
    from llmcalc.analysis.cluster.search import candidates

    cfg, hw, P = load_bundled("gpt2-small"), load_hardware("h100"), 124_439_808
    bf16, fp32 = ({(c.run.layout, c.run.batch, c.run.recompute): c.memory.total
                   for c in candidates(cfg, hw, 8, 1024, 64, grad_dtype=g)} for g in (None, "fp32"))
    whole = [k for k in bf16 if k[0].zero < 2 and k[0].tp == k[0].pp == 1]
    assert whole and all(fp32[k] - bf16[k] == 2 * P for k in whole)


@pytest.mark.unit
def test_grad_dtype_applies_to_training_only():
    with pytest.raises(SpecError) as raised:
        RunSpec("prefill", 1024, grad_dtype="fp32")
    assert raised.value.field == "grad_dtype"
    with pytest.raises(SpecError) as raised:
        RunSpec("train", 1024, grad_dtype="int8")
    assert raised.value.field == "grad_dtype"
    cfg = load_bundled("gpt2-small")
    assert RunSpec("decode", 1024).resolve(cfg).grad_dtype is None
    assert RunSpec("train", 1024, dtype="fp16").resolve(cfg).grad_dtype == "fp16"


@pytest.mark.unit
def test_inference_under_tp_holds_the_gathered_logits():
    """Llama 3.1 70B at tp 8: the vocab-parallel head's 8 x 128,256 bf16 logits are all-gathered whole onto
    every GPU, the payload time's 'tp logits' collective gathers."""
    from llmcalc.analysis.cluster.memory import memory

    run = RunSpec("prefill", 8192, 8, layout=Layout(tp=8))
    assert memory(load_bundled("llama-3.1-70b"), run).parts["logits"] == 8 * 128256 * 2


@pytest.mark.unit
@pytest.mark.parametrize("ep", [2, 8])
def test_expert_parallel_splits_the_experts_weights_not_their_work(ep):
    """Mixtral over 8 data-parallel GPUs: at ``--ep e`` a GPU holds 1/e of the 32 x 8 experts (3 x 4,096 x
    14,336 weights each, bf16), but its experts receive from the other e - 1 GPUs as many token-slots as
    they send away (routing balanced): the same expert FLOPs and saved activations as without ep, and
    the weights it reads are its own: all it holds in training (forward, and twice in backward), and in
    a decode step of 2 sequences (2 x 2 choices, each expert missed by a token with probability 3/4) those
    of its 8 / e the group's 2e tokens reach, 8/e (1 - (3/4)^2e) rounded: 3 at ep 2, 1 at ep 8; one GPU alone
    8 (1 - (3/4)^2) = 3.5, rounded 4."""
    from llmcalc.analysis.cluster.memory import memory
    from llmcalc.analysis.cluster.step import step

    cfg, expert, h100 = load_bundled("mixtral-8x7b"), 3 * 4096 * 14336, load_hardware("h100")
    experts = 32 * 8 * expert
    runs = [RunSpec("train", 4096, 1, layout=Layout(dp=8, ep=e, micro_batches=1)) for e in (1, ep)]
    alone, dealt = (memory(cfg, run) for run in runs)
    assert alone.parts["weights"] - dealt.parts["weights"] == 2 * experts * (ep - 1) // ep
    assert dealt.activation_components == alone.activation_components
    alone, dealt = (step(cfg, run, h100).components["moe/experts"] for run in runs)
    assert dealt.flops == alone.flops
    assert alone.bytes - dealt.bytes == 3 * 2 * experts * (ep - 1) // ep
    decode = [RunSpec("decode", 4096, 2, layout=Layout(dp=8, ep=e)) for e in (1, ep)]
    alone, dealt = (step(cfg, run, h100).components["moe/experts"] for run in decode)
    assert dealt.flops == alone.flops
    assert alone.bytes - dealt.bytes == 2 * 32 * expert * (4 - {2: 3, 8: 1}[ep])
    every = cfg.replace(moe=dataclasses.replace(cfg.moe, experts_per_token=8))  # each token to every expert
    alone, dealt = (step(every, run, h100).components["moe/experts"] for run in decode)
    assert alone.bytes - dealt.bytes == 2 * 32 * expert * (8 - 8 // ep)


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


# -- uneven pipeline stages and interleaved 1F1B ------------------------------------------------------

def test_llama3_405b_split_as_the_llama3_paper():
    """126 layers over 16 stages: "one Transformer layer fewer on the first and the last stage"
    (The Llama 3 Herd of Models, section 3.3.2), the embedding and the loss taking those slots."""
    assert split(126, 16) == [7] + [8] * 14 + [7]
    cfg = load_bundled("llama-3.1-405b")
    assert [len(s) for s in stages(cfg, Layout(pp=16))] == [7] + [8] * 14 + [7]
    # interleaved: 32 virtual stages of 128 slots, 4 each; stage s holds virtual stages s and 16 + s
    assert [len(s) for s in stages(cfg, Layout(pp=16, vpp=2))] == [7] + [8] * 14 + [7]
    assert chunks(126, Layout(pp=16, vpp=2))[0] == [range(0, 3), range(63, 67)]
    # 64 virtual stages of 2 slots: stage 15 holds virtual stages 15, 31, 47 and 63 (the head's slot)
    assert chunks(126, Layout(pp=16, vpp=4))[15] == [range(29, 31), range(61, 63), range(93, 95), range(125, 126)]


@pytest.mark.parametrize("layers, pp, expected", [
    (61, 16, [3, 3] + [4] * 13 + [3]),  # DeepSeek-V3: 63 slots, 3 each and 15 left over
    (70, 12, [5] + [6] * 10 + [5]),  # BLOOM-176B: 72 slots, 6 each
    (32, 4, [8] * 4),  # an even split stays even
    (12, 5, [2, 2, 3, 3, 2]),  # 14 slots: 2 each, one more to the first, the last, stage 3 and stage 2
    (13, 2, [7, 6]),  # 15 slots: the one left over to the first stage
    (4, 4, [1, 1, 1, 1]),
])
def test_uneven_splits(layers, pp, expected):
    assert split(layers, pp) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_split_fills_the_slots_evenly(case):
    """Every layer once, at least one a stage; the slots (layers, the embedding's and the head's)
    differ by at most one between stages; a layer count pp divides splits evenly."""
    n, pp = case
    layers = split(n, pp)
    slots = [k + (s == 0) + (s == pp - 1) for s, k in enumerate(layers)]
    assert sum(layers) == n and min(layers) >= 1 and max(slots) - min(slots) <= 1
    if n % pp == 0:
        assert layers == [n // pp] * pp


def test_uneven_stages_hold_every_parameter_once():
    cfg = load_bundled("deepseek-v3")  # 61 layers, the first 3 dense
    layout = Layout(pp=16)
    held = [sum(t.numel for t in stage_tensors(cfg, layout, s)) for s in range(16)]
    assert sum(held) == count_params(cfg).total  # untied: no copy of the embedding


def test_interleaving_keeps_megatrons_in_flight_chunks():
    """Megatron-Core's interleaved schedule, uniform chunks: with m > p stage 0 keeps v p + p - 1
    chunk forwards (Korthikanti et al. 2022, 4.2.3: p (1 + (p - 1) / (p v)) stages' worth), the last
    stage (v - 1) p + 1; with m = p every forward runs before the first backward."""
    p, v = 4, 2
    layout = Layout(pp=p, vpp=v, micro_batches=8)
    assert held(layout, 0, [1] * v) == [4 + 3, 4]  # chunk 0: p micro-batches and p - 1 of the next group
    assert sum(held(layout, 0, [1] * v)) == v * p + p - 1
    assert sum(held(layout, p - 1, [1] * v)) == (v - 1) * p + 1
    assert held(Layout(pp=p, vpp=v), 2, [1] * v) == [p, p]
    assert held(Layout(pp=p, micro_batches=8), 1, [5]) == [p - 1]  # plain 1F1B: min(p - s, m)


def test_interleaved_bubble_is_the_closed_form():
    """The bubble is (p - 1) / v slots of the slowest stage, (p - 1) / (v m) of its compute and
    per-micro-batch communication. Each model chunk sends its activations (2,048 x 4,096 in bf16) on
    and its input's gradient back, but for the model's last chunk's output and its first chunk's
    gradient: 2v sends a micro-batch on a middle stage, 2v - 1 on the first and the last."""
    cfg, hw = load_bundled("llama-2-7b"), load_hardware("h100")
    p, m = 4, 8
    run = RunSpec("train", 2048, 1)
    plain = step(cfg, run.replace(layout=Layout(pp=p, micro_batches=m)), hw)
    for v in (1, 2, 4):
        st = step(cfg, run.replace(layout=Layout(pp=p, micro_batches=m, vpp=v)), hw)
        slot = st.compute_s[st.stage] + st.comm_s[st.stage] / m
        assert st.bubble_s == (p - 1) / v * slot
        assert st.bubble_s / (m * slot) == pytest.approx((p - 1) / (v * m), rel=1e-15)
        assert st.compute_s == plain.compute_s
        sent = [sum(c.sent for c in collectives(cfg, st.run, s) if c.group == "pp") for s in range(p)]
        assert sent == [(2 * v - (s == 0) - (s == p - 1)) * m * 2048 * 4096 * 2 for s in range(p)]


def test_acceptance_405b_over_2048_gpus(run):
    """Issue 26: 126 layers over PP16 run; interleaving shrinks the bubble to 1/v of it, plus the
    extra point-to-point sends."""
    args = ["llama-3.1-405b", "--hardware", "h100", "--tp", "8", "--pp", "16", "--dp", "64", "--seq", "8192",
            "--global-batch", "2048", "--json"]
    data = {v: json.loads(run("time", *args, "--vpp", str(v)).stdout) for v in (1, 2, 4)}
    assert data[1]["layout"]["micro_batches"] == 32
    assert [data[v]["layout"]["vpp"] for v in (1, 2, 4)] == [1, 2, 4]
    for v in (2, 4):
        assert data[v]["parts_s"]["compute"] == data[1]["parts_s"]["compute"]
        assert data[1]["parts_s"]["bubble"] / v < data[v]["parts_s"]["bubble"] < data[1]["parts_s"]["bubble"]


# -- sequence parallelism, asynchronous TP and fp8 under TP: the time model ------------------------------

def test_sequence_parallelism_runs_the_residual_stream_on_a_tp_shard():
    """--sp: the residual adds and the norms around the branches (and the final norm) run on the
    1/tp of the tokens a GPU holds, in as many kernels; Qwen3's per-head q/k norms stay whole."""
    hw = load_hardware("h100")
    # Qwen3 8B at tp 4: two norms of 4,096 around the branches, q_norm 8 x 128 and k_norm 2 x 128, 36 layers,
    # a final norm of 4,096; Llama 3 8B has the branch and final norms alone
    for name, share in (("llama-3-8b", 1.0),
                        ("qwen3-8b", (36 * 2 * 4096 + 4096) / (36 * (2 * 4096 + 8 * 128 + 2 * 128) + 4096))):
        cfg = load_bundled(name)
        plain = step(cfg, RunSpec("train", 4096, 1, layout=Layout(tp=4, micro_batches=1)), hw).components
        sp = step(cfg, RunSpec("train", 4096, 1, layout=Layout(tp=4, sp=True, micro_batches=1)), hw).components
        for key, f in (("residual", 1 / 4), ("norm", 1 - share + share / 4)):
            assert (sp[key].elementwise_flops, sp[key].bytes) == (round(plain[key].elementwise_flops * f),
                                                                  round(plain[key].bytes * f)), (name, key)
            assert sp[key].latency_s == plain[key].latency_s > 0
            assert sp[key].expected_memory_s == pytest.approx(plain[key].expected_memory_s * f, rel=1e-12)
        for key in ("mlp/up", "attention/q", "attention/scores", "activation", "lm_head"):
            assert sp[key] == plain[key], (name, key)


def test_async_tp_hides_each_regions_collectives_behind_its_linears():
    """--async-tp: of the regions' all-gathers and reduce-scatters (half the attention's, half the
    FFN's), min(communication, (tp - 1)/tp x the region's linears' forward and input-gradient time)
    is hidden: three quarters of their time under full recomputation; nothing else changes."""
    cfg, hw = load_bundled("llama-3.1-70b"), load_hardware("h100")
    run = RunSpec("train", 8192, 2, recompute="full", layout=Layout(tp=8, dp=4, zero=3, sp=True, micro_batches=2))
    vanilla = step(cfg, run, hw)
    overlapped = step(cfg, run.replace(layout=Layout(tp=8, dp=4, zero=3, sp=True, micro_batches=2, async_tp=True)),
                      hw)
    assert (overlapped.components, overlapped.collectives) == (vanilla.components, vanilla.collectives)
    regions = ("tp region outputs", "tp region input gradients")
    comm = sum(t for c, t in zip(vanilla.collectives, vanilla.expected.collectives_s) if c.what in regions) / 2
    parts = vanilla.components  # one micro-batch on the one stage
    attention = sum(parts[k].expected_s for k in ("attention/q", "attention/k", "attention/v", "attention/o"))
    ffn = sum(parts[k].expected_s for k in ("mlp/gate", "mlp/up", "mlp/down"))
    hidden = sum(min(comm, 7 / 8 * 3 / 4 * mm * 2) for mm in (attention, ffn))
    assert 0 < hidden < 2 * comm
    assert overlapped.expected.parts_s["communication"] == pytest.approx(
        vanilla.expected.parts_s["communication"] - hidden, rel=1e-12)
    assert overlapped.time_s < vanilla.time_s and overlapped.time_s <= overlapped.expected.time_s
    with pytest.raises(SpecError, match="needs --sp"):
        Layout(tp=8, async_tp=True)


QWEN_MOE_TINY = """name: qwen-moe-tiny
vocab_size: 1024
context_length: 4096
d_model: 1024
n_layers: 2
n_heads: 8
d_ff: 64
activation: swiglu
norm: rmsnorm
position: rope
qkv_bias: true
moe:
  num_experts: 4
  experts_per_token: 1
  expert_d_ff: 64
  shared_experts: 1
  shared_expert_d_ff: 64
  shared_expert_gate: true
"""


def test_async_tp_hides_nothing_behind_the_replicated_router_and_shared_expert_gate():
    """--async-tp on a Qwen-MoE-style layer: the FFN region's collectives hide behind its
    tensor-parallel linears alone, the routed and shared experts (split over tp); the router (d -> E)
    and the shared expert's sigmoid gate (d -> 1) are whole on every rank, as Megatron-LM's
    SharedExpertMLP keeps ``gate_weight``. Small experts beside a wide d_model: the FFN region's
    collectives outlast its linears, so the gate's time would hide more of them."""
    cfg, hw = load_text(QWEN_MOE_TINY, "qwen-moe-tiny.yaml"), load_hardware("h100")
    run = RunSpec("train", 1024, 1, layout=Layout(tp=4, sp=True, micro_batches=1))
    vanilla = step(cfg, run, hw)
    overlapped = step(cfg, run.replace(layout=Layout(tp=4, sp=True, micro_batches=1, async_tp=True)), hw)
    regions = ("tp region outputs", "tp region input gradients")
    comm = sum(t for c, t in zip(vanilla.collectives, vanilla.expected.collectives_s) if c.what in regions) / 2
    parts = vanilla.components
    attention = sum(parts[k].expected_s for k in ("attention/q", "attention/k", "attention/v", "attention/o"))
    ffn = parts["moe/experts"].expected_s + parts["moe/shared_experts"].expected_s
    gate = parts["moe/shared_expert_gate"].expected_s
    assert 3 / 4 * 2 / 3 * ffn < 3 / 4 * 2 / 3 * (ffn + gate) < comm  # the gate would change the figure
    hidden = sum(min(comm, 3 / 4 * 2 / 3 * mm) for mm in (attention, ffn))
    assert overlapped.expected.parts_s["communication"] == pytest.approx(
        vanilla.expected.parts_s["communication"] - hidden, rel=1e-12)


def test_op_reruns_the_all_gathers_and_keeps_the_reduce_scattered_outputs():
    """--recompute op under TP: backward runs each region's forward all-gather again (its all-reduce
    without sp), not its reduce-scatter, whose output the policy keeps: T/tp x d a region and layer
    under sp. The MoE all-to-alls run again; ring attention's sends are inside the kernel it keeps."""
    cfg, hw, T, L, d, b = load_bundled("llama-3-8b"), load_hardware("h100"), 4096, 32, 4096, 2

    def region_outputs(recompute: str, sp: bool) -> dict[str, tuple[int, int]]:
        run = RunSpec("train", T, 1, recompute=recompute, layout=Layout(tp=4, sp=sp, micro_batches=1))
        out: dict[str, tuple[int, int]] = {}
        for c in step(cfg, run, hw).collectives:
            if c.what in ("tp region outputs", "tp region outputs, rerun"):
                calls, payload = out.get(c.kind, (0, 0))
                out[c.kind] = (calls + c.calls, payload + c.payload)
        return out

    once = (2 * L, 2 * L * T * d * b)  # two regions a layer, one micro-batch
    assert region_outputs("none", True) == {"reduce-scatter": once, "all-gather": once}
    assert region_outputs("op", True) == {"reduce-scatter": once, "all-gather": (2 * once[0], 2 * once[1])}
    assert region_outputs("op", False) == {"all-reduce": (2 * once[0], 2 * once[1])}
    run = RunSpec("train", T, 1, recompute="op", layout=Layout(tp=4, sp=True, micro_batches=1))
    assert saved(stage_saves(cfg, run)[0])[REDUCE_SCATTERED] == L * 2 * T // 4 * d * b
    plain = run.replace(layout=Layout(tp=4, micro_batches=1))
    assert REDUCE_SCATTERED not in saved(stage_saves(cfg, plain)[0])
    moe = load_bundled("mixtral-8x7b")
    calls = {r: sum(c.calls for c in step(moe, RunSpec("train", 1024, 1, recompute=r, layout=Layout(
        dp=2, ep=2, micro_batches=1)), hw).collectives if c.group == "ep") for r in ("none", "op")}
    assert calls == {"none": 2 * 32 * 2, "op": 2 * 32 * 3}  # forward and backward; op a forward more


def test_fp8_tensorwise_under_sp_casts_each_region_input_once_on_the_shard_and_gathers_fp8():
    """torchao's float8 TP plans (torchtitan): q, k and v share one cast of their input, gate and up
    another, each on the 1/tp of the tokens a GPU holds, and so do o's and down's output gradients;
    the regions' all-gathers move fp8, their reduce-scatters bf16. Rowwise keeps every cast."""
    from llmcalc.analysis.cluster.sharding import tp_local

    cfg, hw, T, L, d = load_bundled("llama-3-8b"), load_hardware("h100"), 4096, 32, 4096
    q, kv, f = 1024, 256, 3584  # a tp-4 rank's widths: 8 query heads, 2 KV heads of 128, 14,336 / 4
    layout = Layout(tp=4, sp=True, micro_batches=1)
    st = step(cfg, RunSpec("train", T, 1, dtype="fp8", layout=layout), hw)
    for c in st.collectives:
        if c.what in ("tp region outputs", "tp region input gradients"):
            assert c.payload == c.calls * T * d * (1 if c.kind == "all-gather" else 2), c
    x = T // 4 * d + T * q + T // 4 * d + T * f  # q/k/v's input once, o's, gate/up's once, down's
    g = T * (q + 2 * kv) + T // 4 * d + 2 * T * f + T // 4 * d  # q k v, o (shard), gate up, down (shard)
    w = d * (q + 2 * kv) + q * d + 2 * d * f + f * d
    casts = st.components["float8/casts"]
    assert (casts.elementwise_flops, casts.bytes) == (3 * L * (x + w + g), L * (4 * x + 6 * w + 4 * g))
    rowwise = step(cfg, RunSpec("train", T, 1, dtype="fp8", fp8_scaling="rowwise", layout=layout), hw)
    whole = roofline(tp_local(cfg, 4), RunSpec("train", T, 1, dtype="fp8", fp8_scaling="rowwise"), hw)
    assert rowwise.components["float8/casts"] == whole.components["float8/casts"]
    assert all(c.payload == c.calls * T * d * 2 for c in rowwise.collectives if c.group == "tp" and
               c.what.startswith("tp region"))


# -- generate on a tensor-parallel layout (gpt-fast's TP decode) ---------------------------------------

def test_generate_on_tp_at_one_new_token_is_the_parallel_prefill():
    """gpt-fast's tp.py shards the layers' linears alone: every GPU holds the whole embedding and LM
    head, computes every logit, and all-reduces only its layers' outputs."""
    cfg, hw = load_bundled("llama-3.1-8b"), load_hardware("a100-80gb")
    run = RunSpec("prefill", 5, 1, layout=Layout(tp=4))
    pg = generate_parallel(cfg, run, hw, 5, 1)
    g, p = pg.generation, one_pass(cfg, run, hw)
    vocab, d, L = 128256, 4096, 32
    assert p.compute.components["lm_head"].matmul_flops == 2 * d * vocab  # the last token's logits, whole
    assert [(c.what, c.kind, c.calls, c.payload) for c in p.collectives] == [
        ("tp region outputs", "all-reduce", 2 * L, 2 * L * 5 * d * 2)]
    assert p.collectives[0].sent == 2 * L * 5 * d * 2 * 2 * 3 // 4  # a ring all-reduce sends 2 (n - 1) / n
    assert g.ttft_s(False) == g.total_s(False) == p.compute.time_s + p.communication_s
    assert g.ttft_s(True) == g.total_s(True) == p.compute.expected_s + p.expected_communication_s
    assert (g.decode_s, g.no_cache_s, pg.decode_sent, pg.no_cache_sent) == (0.0, 0.0, 0, 0)


@pytest.mark.parametrize("name, tp, prompt, new", [
    ("llama-3.1-8b", 2, 5, 40),
    ("mixtral-8x7b", 4, 1, 30),  # every expert read from the fourth token on
    ("mistral-7b", 8, 4090, 12),  # the 4,096 window crossed
])
def test_generate_on_tp_sums_the_parallel_steps_in_closed_form(name, tp, prompt, new):
    """Each decode step (and each no-cache step) is a parallel pass: the closed form equals their
    loop, the bytes sent exactly, the ideal seconds to rounding (rel 1e-9, as tests/test_time.py)."""
    cfg, hw = load_bundled(name), load_hardware("a100-80gb")
    pg = generate_parallel(cfg, RunSpec("prefill", prompt, 2, layout=Layout(tp=tp)), hw, prompt, new)
    g = pg.generation
    loops = {}
    for mode in ("decode", "prefill"):
        passes = [one_pass(cfg, RunSpec(mode, prompt + k, 2, layout=Layout(tp=tp)), hw) for k in range(1, new)]
        loops[mode] = (sum(p.sent for p in passes), sum(p.compute.time_s + p.communication_s for p in passes),
                       sum(p.compute.expected_s + p.expected_communication_s for p in passes),
                       sum(p.expected_communication_s for p in passes))
    assert (pg.decode_sent, pg.no_cache_sent) == (loops["decode"][0], loops["prefill"][0])
    assert pg.decode_sent == (new - 1) * pg.decode.sent
    assert g.decode_s == pytest.approx(loops["decode"][1], rel=1e-9, abs=0)
    assert g.no_cache_s == pytest.approx(loops["prefill"][1], rel=1e-9, abs=0)
    # expected: each piece of passes at its middle pass's calibrated rates (analysis/perf/steps.py), within
    # 1% of the loop as on one GPU (tests/test_time.py's EXPECTED_SUM_REL), and the decode steps, whose GEMM rows
    # are the batch, within 1e-4 (5e-5 on Mixtral's); past the shard's compute summed as on one GPU, the
    # collectives' alpha-beta time equals the loop's to rounding
    assert g.expected_decode_s == pytest.approx(loops["decode"][2], rel=1e-4, abs=0)
    assert g.expected_no_cache_s == pytest.approx(loops["prefill"][2], rel=1e-2, abs=0)
    local = decode_sums(shard(cfg, tp), RunSpec("prefill", prompt, 2), hw, prompt, new)
    assert g.expected_decode_s - local[2] == pytest.approx(loops["decode"][3], rel=1e-9, abs=0)
    assert g.expected_no_cache_s - local[3] == pytest.approx(loops["prefill"][3], rel=1e-9, abs=0)


def test_generate_under_tp_sizes_the_whole_vocabulary_it_times(run):
    """generate's tp is gpt-fast's, the token embedding and LM head whole on every GPU: its memory is memory's
    per-GPU figure (vocabulary split over tp) of the larger of the prefill and the last decode step, plus the 7/8
    of Llama 3.1 70B's two 128,256 x 8,192 bf16 tensors a GPU of tp 8 holds beyond its shard."""
    timed = json.loads(run("time", "llama-3.1-70b", "--batch", "8", "--tp", "8", "--hardware", "h100", "--mode",
                           "generate", "--prompt", "1000", "--new", "2", "--json").stdout)
    cfg, layout = load_bundled("llama-3.1-70b"), Layout(tp=8)
    split = max(memory(cfg, RunSpec("prefill", 1000, 8, layout=layout)).total,
                memory(cfg, RunSpec("decode", 1002, 8, layout=layout)).total)
    assert timed["memory_bytes"] == split + 2 * (128256 - 128256 // 8) * 8192 * 2


@pytest.mark.parametrize("name, dp, ep, prompt, new", [
    ("qwen3-30b-a3b", 2, 2, 1, 12),  # a GPU's 64 experts all read from the fourth token of a no-cache pass on
    ("mixtral-8x7b", 4, 4, 30, 9),
    ("llama-3.1-8b", 3, 1, 5, 7),  # data-parallel replicas alone: one GPU's generation, no collective
])
def test_generate_on_data_parallel_gpus_sums_the_expert_parallel_steps(name, dp, ep, prompt, new):
    """SGLang's and vLLM's MoE serving (--dp --ep): each GPU its own batch through the whole attention and the
    experts it holds, each pass's dispatch and combine an all-to-all over ep; the closed form equals the loop
    of passes as on tp."""
    cfg, hw = load_bundled(name), load_hardware("h100")
    layout = Layout(dp=dp, ep=ep)
    pg = generate_parallel(cfg, RunSpec("prefill", prompt, 2, layout=layout), hw, prompt, new)
    g = pg.generation
    for mode, sent, ideal, expected in (("decode", pg.decode_sent, g.decode_s, g.expected_decode_s),
                                        ("prefill", pg.no_cache_sent, g.no_cache_s, g.expected_no_cache_s)):
        passes = [one_pass(cfg, RunSpec(mode, prompt + k, 2, layout=layout), hw) for k in range(1, new)]
        assert sent == sum(p.sent for p in passes)
        assert ideal == pytest.approx(sum(p.compute.time_s + p.communication_s for p in passes), rel=1e-9, abs=0)
        assert expected == pytest.approx(sum(p.compute.expected_s + p.expected_communication_s for p in passes),
                                         rel=1e-4 if mode == "decode" else 1e-2, abs=0)
    kinds = {(c.what, c.kind, c.group) for c in pg.decode.collectives}
    assert kinds == ({("ep dispatch and combine", "all-to-all", "ep")} if ep > 1 else set())
    if ep == 1:  # a replica is one GPU's generation
        alone = generate(cfg, RunSpec("prefill", prompt, 2), hw, prompt, new)
        assert (g.decode_s, g.expected_decode_s) == (alone.decode_s, alone.expected_decode_s)


def test_several_generations_on_tp_are_titled_per_gpu(run):
    out = run("time", "llama-2-7b", "--hardware", "h100", "--mode", "generate", "--prompt", "64", "--new", "4",
              "--tp", "2", "--batch", "1,8").stdout
    assert out.splitlines()[0] == "generate on 2 x h100, tp 2: FLOPs and bytes per GPU"


def test_time_generate_on_tp_reports_the_communication(run):
    data = json.loads(run("time", "llama-2-7b", "--hardware", "a100-80gb", "--mode", "generate", "--prompt", "5",
                          "--new", "200", "--tp", "8", "--json").stdout)
    comm = data["communication"]
    assert data["gpus"] == 8 and data["layout"]["tp"] == 8 and data["time_s"] == data["total_s"]
    assert comm["decode_sent"] == 199 * comm["step_sent"] > 0
    assert {(c["what"], c["kind"]) for c in comm["collectives"]} == {("tp region outputs", "all-reduce")}
    assert "communication (included above)" in run("time", "llama-2-7b", "--hardware", "a100-80gb", "--mode",
                                                  "generate", "--prompt", "5", "--new", "200", "--tp", "8").stdout


def _exhaustive(cfg, hw, gpus, seq, global_batch):
    """`plan`'s candidates evaluated one by one from first principles: every stage's report from its
    full breakdown (no stage figured once for several), a fresh step per layout (nothing shared)."""
    from llmcalc.analysis.cluster import sharding
    from llmcalc.analysis.cluster.search import layouts
    from llmcalc.analysis.count.memory import attention_bytes, state_bytes
    from llmcalc.analysis.model.layers import layer_specs

    out = []
    for layout in layouts(cfg, gpus, hw.gpus_per_node, seq):
        b, fitted = 1, True
        while fitted and global_batch % (b * layout.dp) == 0:
            micro = Layout(layout.tp, layout.pp, layout.dp, layout.ep, layout.zero, layout.sp,
                           global_batch // (b * layout.dp), layout.cp)
            fitted = False
            for recompute in ("none", "full"):
                run = RunSpec("train", seq, b, recompute=recompute, layout=micro).resolve(cfg)
                try:
                    sharding.check_layout(cfg, run)
                except SpecError:
                    break
                totals = []
                for s, acts in enumerate(sharding.saved(stage) for stage in sharding.stage_saves(cfg, run)):
                    state = sharding.gpu_state(cfg, micro, s)
                    train = state_bytes(state.weights, state.gradients, state.optimizer, run)
                    rerun = sharding.recomputed_layer(cfg, sharding.cp_local(run).replace(layout=Layout()), micro.tp,
                                                      micro.sp, sharding.in_stage(cfg, micro, s))
                    attends = any(layer_specs(cfg)[i].attends for i in sharding.stages(cfg, micro)[s])
                    totals.append(sum(train) + sum(acts.values()) + rerun
                                  + attends * attention_bytes(sharding.tp_local(cfg, micro.tp), b, seq, seq,
                                                              run.attention, run.dtype, training=True))
                total = max(totals)
                fits = total <= hw.memory
                s = step(cfg, run, hw) if fits else None
                out.append((micro, b, recompute, total, totals.index(total), fits,
                            s and (s.time_s, s.expected.time_s, s.parts_s, s.expected.parts_s, s.sent, s.collectives)))
                fitted |= fits
            b *= 2
    return sorted(out, key=lambda c: (not c[5], c[6][1] if c[6] else 0.0, c[3]))


@pytest.mark.parametrize("model, what", [
    ("gemma-4-26b-a4b", "a dense MLP beside its experts (moe.beside_mlp), which is"),
])
def test_plan_and_memory_refuse_what_is_sized_on_one_gpu_alike(run, model, what):
    """plan names the feature memory names for the same model: not "the heads, layers or global batch
    do not divide"."""
    plan = run("plan", model, "--gpus", "16", "--hardware", "h100", "--seq", "4096", "--global-batch", "64")
    memory = run("memory", model, "--dp", "2")
    assert (plan.exit_code, plan.stderr) == (2, f"Error: --gpus 16: {model} has {what} sized on one GPU only\n")
    assert (memory.exit_code, memory.stderr) == (
        2, f"Error: --dp 2: {model} has {what} sized on one GPU only: not with a parallel layout\n")


@pytest.mark.parametrize("model, gpus", [("gpt2-small", 8), ("gemma-2-9b", 16), ("mixtral-8x7b", 16)])
def test_plan_equals_the_exhaustive_evaluation(model, gpus):
    """The shared, once-per-stage work of `plan` changes no figure and no rank."""
    from llmcalc.analysis.cluster.search import candidates

    cfg, hw = load_bundled(model), load_hardware("h100")
    fast = [(c.run.layout, c.run.batch, c.run.recompute, c.memory.total, c.memory.stage, c.fits,
             c.step and (c.step.time_s, c.step.expected.time_s, c.step.parts_s, c.step.expected.parts_s, c.step.sent,
                         c.step.collectives))
            for c in candidates(cfg, hw, gpus, 4096, 64)]
    assert fast == _exhaustive(cfg, hw, gpus, 4096, 64)


@pytest.mark.parametrize("model, gpus, top", [("gpt2-small", 8, 3), ("gemma-2-9b", 16, 10), ("mixtral-8x7b", 16, 5),
                                              ("qwen3-30b-a3b", 64, 10), ("llama-3.1-70b", 512, 10)])
def test_plan_ranking_prunes_and_equals_every_candidate(model, gpus, top):
    """`plan`'s table (search.ranked): the first `top` fitting candidates of the full evaluation, the same
    figures in the same order, and the same counts, with steps figured for fewer candidates than fit
    (the lower bounds prune the others)."""
    from llmcalc.analysis.cluster.search import candidates, ranked

    cfg, hw = load_bundled(model), load_hardware("h100")
    found = candidates(cfg, hw, gpus, 4096, 256)
    fitting = [c for c in found if c.fits]
    best = ranked(cfg, hw, gpus, 4096, 256, top)
    assert (best.fitting, best.weighed) == (len(fitting), len(found))
    assert best.best == fitting[:top]
    assert top <= best.evaluated < best.fitting


def test_plan_ranking_keeps_ties_in_enumeration_order():
    """Equal expected steps and memory (sp on and off can tie): the ranking keeps candidates()' order."""
    from llmcalc.analysis.cluster.search import candidates, ranked

    cfg, hw = load_bundled("gpt2-small"), load_hardware("h100")
    fitting = [c for c in candidates(cfg, hw, 8, 1024, 64) if c.fits]
    for top in (1, 2, 7, len(fitting) + 3):
        assert ranked(cfg, hw, 8, 1024, 64, top).best == fitting[:top]


@pytest.mark.parametrize("model, gpus, overlap", [("gemma-2-9b", 16, 0.55), ("gemma-2-9b", 16, 1.0),
                                                  ("mixtral-8x7b", 16, 1.0), ("llama-3.1-70b", 32, 0.55)])
def test_plan_floors_never_pass_the_step(model, gpus, overlap):
    """The lower bounds `plan` prunes with (step.floors, then step.data_parallel_floor), each at least the one
    before, never pass the expected step, under any overlap of the data-parallel communication and every
    layout (ZeRO 0 to 3, ep, pp); without stages, and with one expert a GPU (the pass its compute's bound is
    of), the last is the step but its optimizer (it leaves out only that)."""
    from llmcalc.analysis.cluster.search import candidates
    from llmcalc.analysis.cluster.step import data_parallel_floor, fastest_ep, floors

    cfg, h100 = load_bundled(model), load_hardware("h100")
    hw = h100._replace(calibration=h100.calibration._replace(overlap=overlap))
    shared: dict = {}
    tight = 0
    for c in candidates(cfg, hw, gpus, 4096, 64):
        if not c.fits:
            continue
        floor = floors(cfg, c.run, hw, None, shared)
        with_dp = data_parallel_floor(cfg, c.run, hw, floor, shared)
        expected = c.step.expected
        assert floor.compute <= floor.communication <= with_dp <= expected.time_s, c.run.layout
        if c.run.layout.pp == 1 and c.run.layout.ep == fastest_ep(cfg):
            assert with_dp == pytest.approx(expected.time_s - expected.optimizer_s, rel=1e-8), c.run.layout
            tight += 1
    assert tight > 0


def test_plan_table_ranks_as_the_json_lists(run):
    """The table and the JSON (pruned: search.ranked) give the first --top fitting layouts of --all's JSON
    (every layout evaluated), and its counts."""
    args = ("plan", "mixtral-8x7b", "--gpus", "16", "--hardware", "h100", "--seq", "4096", "--global-batch", "256",
            "--top", "3")
    every = json.loads(run(*args[:-2], "--all", "--json").stdout)
    data = json.loads(run(*args, "--json").stdout)
    table = run(*args, "--format", "table").stdout
    fitting = [r for r in every["layouts"] if r["fits"]]
    assert (every["fitting"], every["enumerated"]) == (data["fitting"], data["enumerated"]) \
        == (len(fitting), len(every["layouts"]))
    assert data["layouts"] == fitting[:3]
    assert f"{len(fitting):,} of {len(every['layouts']):,} layouts fit" in table
    rows = [line.split("│")[1:-1] for line in table.splitlines() if line.startswith("│")]
    assert len(rows) == 3
    for row, rec in zip(rows, fitting):
        cells = [c.strip() for c in row]
        assert cells[1:7] == [str(rec["layout"][k]) for k in ("tp", "cp", "pp", "dp", "ep", "zero")]
        assert cells[14] == f"{100 * rec['bubble']:.1f}%" and cells[16] == f"{100 * rec['expected']['mfu']:.1f}%"
        assert cells[15] == f"{rec['expected']['tokens_per_s']:,.0f}"


def test_plan_all_ignores_top_with_a_warning(run):
    result = run("plan", "gpt2-small", "--gpus", "2", "--hardware", "h100", "--seq", "1024", "--global-batch", "8",
                 "--all", "--top", "1", "--json")
    data = json.loads(result.stdout)
    assert result.stderr == "Warning: --all lists every layout: --top is ignored\n"
    assert len(data["layouts"]) == data["enumerated"] > 1


# -- flops under a layout (analysis/cluster/flops.py) ----------------------------------------------------

def test_flops_under_tp_and_pp_are_the_last_stages_gpu(run):
    """Llama 3.1 70B (80 layers of d 8,192, 64 heads of 128, 8 KV heads, vocabulary 128,256) over tp 8 and pp 4: a
    GPU of each stage holds 20 layers' 1/8; the last adds the head's 1/8 of the vocabulary and is the busiest,
    the middle two equal. One GPU's forward q and LM head, written out."""
    data = json.loads(run("flops", "llama-3.1-70b", "--seq", "8192", "--tp", "8", "--pp", "4", "--json").stdout)
    fwd = data["forward"]["components"]
    assert (data["gpus"], data["stage"], data["cp_rank"]) == (32, 3, 0) and "approximations" not in data
    assert fwd["attention/q"] == 20 * 2 * 8192 * 8192 * (64 // 8 * 128)
    assert fwd["attention/k"] == 20 * 2 * 8192 * 8192 * 128  # one KV head a GPU
    assert fwd["lm_head"] == 2 * 8192 * 8192 * (128256 // 8)
    totals = data["stage_totals"]
    assert totals[1] == totals[2] and max(totals) == totals[3] == data["total"]["total"] > totals[0]
    assert [g["count"] for g in data["layer_groups"]] == [20]


def _window_pairs(positions, window):
    return sum(min(p + 1, window) for p in positions)


def test_flops_under_cp_are_the_busiest_ranks_chunks(run):
    """Mistral 7B (32 layers, 32 heads of 128, a 4,096 window) at 8,192 tokens over cp 2: each sequence in 4 chunks
    of 2,048, GPU 0 holding the first and last, GPU 1 the middle two, more pairs under the window (causal); the
    dense convention gives each GPU its 4,096 queries against every key."""
    args = ("flops", "mistral-7b", "--seq", "8192", "--cp", "2", "--json")
    causal = json.loads(run(*args, "--causal").stdout)
    assert causal["cp_rank"] == 1
    pairs, first = _window_pairs(range(2048, 6144), 4096), _window_pairs([*range(2048), *range(6144, 8192)], 4096)
    assert pairs > first
    assert causal["forward"]["components"]["attention/scores"] == 32 * 2 * 32 * pairs * 128
    assert causal["forward"]["components"]["attention/q"] == 32 * 2 * 4096 * 4096 * 4096  # its 4,096 tokens
    dense = json.loads(run(*args).stdout)
    assert dense["cp_rank"] == 0  # every GPU alike
    assert dense["forward"]["components"]["attention/scores"] == 32 * 2 * 32 * 4096 * 8192 * 128
    # beside it, GPU 0's causal matmuls: each pair of a head 2 x 128 FLOPs in q k^T, four times with its two
    # gradients and the flash backward's recomputation, and three times in P V with its two gradients
    per_pair = 32 * 32 * 2 * 128 * (4 + 3)
    assert dense["causal_total_matmul"] == causal["total"]["matmul"] - (pairs - first) * per_pair


@pytest.mark.parametrize("model", ["gemma-3-27b", "mistral-7b", "llama-3.1-8b"])
def test_time_under_cp_runs_the_busiest_ranks_attention_core(run, model):
    """time and flops share one rule for a context-parallel GPU's attention core: the busiest rank's (under a
    sliding window not 1/cp of the sequence's), so a step's scores and values are flops --causal's."""
    args = (model, "--seq", "8192", "--cp", "2", "--json")
    timed = json.loads(run("time", *args, "--hardware", "h100").stdout)["components"]
    counted = json.loads(run("flops", *args, "--causal").stdout)["total"]["components"]
    for key in ("attention/scores", "attention/values"):
        assert timed[key]["flops"] == counted[key]


@pytest.mark.parametrize("args, message", [
    (("--seq", "8190", "--cp", "2"), "Error: --cp 2 splits each sequence into 4 chunks (Megatron's load balancing of "
     "causal attention), which must divide the 8,190 tokens of a sequence\n"),
    (("--mode", "decode", "--cp", "2"), "Error: --cp 2: context parallelism splits a sequence's new tokens, and a "
     "decode step has one\n"),
    (("--tp", "3"), "Error: --tp 3 must divide the 32 attention heads of mistral-7b\n"),
])
def test_flops_refuses_a_layout_it_cannot_split(run, args, message):
    result = run("flops", "mistral-7b", *args)
    assert (result.exit_code, result.stderr) == (2, message)


def test_flops_refuses_images_under_a_layout(run):
    result = run("flops", "gemma-3-27b-it", "--seq", "100", "--images", "1", "--tp", "2")
    assert (result.exit_code, result.stderr) == (2, "Error: --images with a parallel layout: the vision tower's "
                                                    "share of a GPU is not counted by flops (without a layout, flops "
                                                    "counts the tower)\n")


# -- quantized weight formats under layouts (analysis/cluster/stored.py) --------------------------------

def _awq(d_in, d_out):  # AutoAWQ: qweight int32 (d_in, d_out/8), qzeros int32 (d_in/128, d_out/8), scales fp16
    return (d_in + d_in // 128) * (d_out // 8) * 4 + (d_in // 128) * d_out * 2


def test_awq_under_tp2_holds_half_of_each_matrix_and_streams_it():
    """Llama-2-7B (d 4,096, d_ff 11,008 = 86 groups of 128, V 32,000) in AWQ int4 over tp 2: each
    column shard (q, k, v, up, gate) halves the outputs and their scales, each row shard (o, down) the
    input groups, so a GPU holds half of every matrix; the embedding and bf16 head are vocab-split,
    the norms replicated. A decode pass streams the shard's matrices (mlp/down: its weights, then its
    bf16 input and output of one token)."""
    cfg = load_bundled("llama-2-7b")
    L, d, f, V = 32, 4096, 11_008, 32_000
    layer = 4 * _awq(d, d) + 2 * _awq(d, f) + _awq(f, d)
    norms = (2 * L + 1) * d * 2
    run = RunSpec("prefill", 1024, 1, weights_dtype="awq-int4")
    assert memory(cfg, run).parts["weights"] == L * layer + 2 * V * d * 2 + norms
    assert memory(cfg, run.replace(layout=Layout(tp=2))).parts["weights"] == L * layer // 2 + V * d * 2 + norms
    decode = one_pass(cfg, run.replace(mode="decode", layout=Layout(tp=2)), load_hardware("h100"))
    assert decode.compute.components["mlp/down"].bytes == L * (_awq(f // 2, d) + 2 * (f // 2 + d))


def test_qlora_under_zero3_shards_the_codes_and_keeps_the_scales():
    """NF4 QLoRA on Llama-2-7B over dp 2 with ZeRO-3, as FSDP-QLoRA shards it: each quantized matrix's
    n/2 bytes of codes split over the 2 GPUs, its fp32 absmax per 64 values (n/16 bytes) and 16-entry
    fp32 code map whole on each; the bf16 embedding, head and norms and the rank-16 adapters on q and
    v (4 tensors of 16 x 4,096 a layer) halved. ZeRO-3 all-gathers the codes and the adapters, the root
    unit once and each layer twice a micro-batch."""
    from llmcalc.analysis.cluster.stored import held_bytes
    from llmcalc.analysis.spec import LoRA

    cfg = load_bundled("llama-2-7b")
    L, d, f, V = 32, 4096, 11_008, 32_000
    n = 4 * d * d + 3 * d * f  # quantized values a layer
    root, norms, adapters = (2 * V * d + d) * 2, 2 * d * 2, 4 * 16 * d
    layout = Layout(dp=2, zero=3)
    frozen = root // 2 + L * (n // 2 // 2 + n // 16 + 7 * 16 * 4 + norms // 2)
    assert held_bytes(cfg, layout, 0, "nf4", "bf16", True) == frozen
    run = RunSpec("train", 1024, 1, weights_dtype="nf4", lora=LoRA(16), layout=layout)
    assert memory(cfg, run).parts["weights"] == frozen + L * adapters // 2 * 2
    gathered = next(c for c in collectives(cfg, run, 0) if c.what == "zero-3 weights")
    assert gathered.payload == root + 2 * L * (n // 2 + norms + adapters * 2)


def test_fp8_block_experts_are_whole_on_each_expert_parallel_gpu():
    """Mixtral-8x7B's experts in fp8-block (one byte a value, an fp32 scale per 128 x 128 block): ep 2
    deals 4 whole experts of each layer to a GPU, half of the 8."""
    from llmcalc.analysis.cluster.stored import held_bytes

    cfg = load_bundled("mixtral-8x7b")
    d, f = 4096, 14_336
    expert = 3 * (d * f + (d // 128) * (f // 128) * 4)  # up, gate and down
    for ep in (1, 2):
        assert held_bytes(cfg, Layout(dp=2, ep=ep), 0, "fp8-block", "bf16", False, expert=True) == 32 * 8 * expert // ep


def test_plan_sizes_qlora_as_memory_does(run):
    """plan weighs QLoRA layouts (nf4 base, adapters) with the per-GPU memory `memory` gives them."""
    args = ["qwen3-30b-a3b", "--seq", "4096", "--lora-rank", "16", "--weights-dtype", "nf4"]
    data = json.loads(run("plan", *args, "--gpus", "8", "--hardware", "h100", "--global-batch", "64", "--top", "1",
                          "--json").stdout)
    best = data["layouts"][0]
    assert (data["dtype"], data["weights_dtype"]) == ("bf16", "nf4")
    layout, flags = best["layout"], ["--recompute", best["recompute"], *(["--sp"] if best["layout"]["sp"] else [])]
    for k in ("tp", "pp", "dp", "ep", "zero", "cp", "vpp"):
        flags += [f"--{k}", str(layout[k])]
    mem = json.loads(run("memory", *args, *flags, "--batch", str(best["micro_batch"]), "--global-batch", "64",
                         "--json").stdout)
    assert layout["dp"] > 1 and mem["total"] == best["memory"]


def test_memory_names_the_stage_it_shows(run):
    """--stage 1 of GPT-2 small over 2 stages: 6 layers (each 12d^2 + 13d), the final norm and a copy of the tied
    embedding as its LM head (V = 50,257, d = 768), as its fp32 checkpoint stores them; the peak is stage 0."""
    d, V = 768, 50257
    args = ("gpt2-small", "--mode", "inference", "--seq", "1024", "--pp", "2", "--json")
    peak = json.loads(run("memory", *args).stdout)
    last = json.loads(run("memory", *args, "--stage", "1").stdout)
    assert last["weights"] == 4 * (6 * (12 * d * d + 13 * d) + 2 * d + V * d)
    assert (peak["stage"], last["stage"], last["total"]) == (0, 1, peak["stage_totals"][1])
    assert last["stage_totals"] == peak["stage_totals"]
    past = run("memory", *args, "--stage", "2")
    assert (past.exit_code, past.stderr) == (2, "Error: --stage 2: the layout has 2 pipeline stages, 0 to 1\n")


def test_time_generate_on_data_parallel_gpus_counts_every_gpus_sequences(run):
    args = ("qwen3-30b-a3b", "--hardware", "h100", "--mode", "generate", "--prompt", "100", "--new", "50", "--dp", "4",
            "--ep", "2", "--batch", "8")
    data = json.loads(run("time", *args, "--json").stdout)
    assert data["tokens_per_s"] == 4 * 8 * 50 / data["total_s"]
    assert data["expected"]["tokens_per_s"] == 4 * 8 * 50 / data["expected"]["total_s"]
    out = run("time", *args).stdout
    assert out.splitlines()[0].endswith("dp 4, ep 2: one GPU's FLOPs and bytes")
    assert "50 new tokens x batch 8 on each of 4 data-parallel GPUs" in out
    replicas = run("time", "llama-3.1-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "100", "--new",
                   "50", "--dp", "4").stdout
    assert "communication" not in replicas  # replicas alone send nothing


def test_batches_in_flight_keep_an_inference_pipeline_full():
    """Serving over 4 pipeline stages with m batches in flight (vLLM keeps pp of them): the passes follow one
    another without the pipeline draining. One batch's pass is its way through the 4 stages: one GPU's roofline
    and the sends between stages (the last stage holds the LM head, the first the embedding: uneven). From 4
    batches on, the pipeline is full: each batch adds a slot of the slowest stage (6 take 6/4 of 4's time); with
    fewer, a pass of each is the longer of one batch's way and its share of a full pipeline's. m batches' tokens;
    each stage's GPUs hold the cache of all m; the bubble is the pass's idle share, in the table's figures."""
    cfg, hw = load_bundled("llama-3.1-70b"), load_hardware("h200")
    run = RunSpec("decode", 4096, 8)
    steps = {m: step(cfg, run.replace(layout=Layout(pp=4, micro_batches=m)), hw) for m in (1, 2, 3, 4, 6)}
    assert steps[1].time_s == pytest.approx(roofline(cfg, run, hw).time_s + sum(steps[1].comm_s), rel=1e-12)
    for times in ({m: p.time_s for m, p in steps.items()}, {m: p.expected.time_s for m, p in steps.items()}):
        assert times[1] < times[4]  # one batch's way is not a full pipeline's 4 slots of the slowest stage
        assert times[6] == pytest.approx(6 / 4 * times[4], rel=1e-12)
        for m in (2, 3):
            assert times[m] == pytest.approx(max(times[1], m / 4 * times[4]), rel=1e-12)
    for m, pipe in steps.items():
        assert pipe.tokens == m * 8 and pipe.expected.time_s >= pipe.time_s
        for figures in (pipe, pipe.expected):
            assert figures.bubble == pytest.approx(figures.parts_s["bubble"] / figures.time_s, rel=1e-12)
        kv = memory(cfg, run.replace(layout=Layout(pp=4, micro_batches=m))).parts["kv_cache"]
        assert kv == m * 20 * 8 * 4096 * 2 * 8 * 128 * 2  # 20 of the 80 layers on the peak stage


def test_batches_in_flight_need_a_pipeline_and_memory_names_them(run):
    one_gpu = run("time", "llama-3.1-8b", "--hardware", "h100", "--mode", "decode", "--batch", "8", "--global-batch",
                  "32", "--tp", "2")
    assert (one_gpu.exit_code, one_gpu.stderr) == (
        2, "Error: --global-batch in inference, the sequences in flight through a pipeline: it needs --pp > 1 (one "
           "GPU's batch is --batch)\n")
    args = ("llama-3.1-70b", "--mode", "inference", "--seq", "4096", "--pp", "2", "--batch", "4", "--json")
    assert json.loads(run("memory", *args).stdout)["layout"]["micro_batches"] == 1
    assert json.loads(run("memory", *args, "--global-batch", "12").stdout)["layout"]["micro_batches"] == 3


def test_generate_takes_no_batches_in_flight():
    cfg, hw = load_bundled("llama-3.1-8b"), load_hardware("h100")
    with pytest.raises(SpecError, match="does not apply to generate, which runs one batch a GPU"):
        generate_parallel(cfg, RunSpec("prefill", 10, 1, layout=Layout(dp=2, micro_batches=4)), hw, 10, 5)


@pytest.mark.parametrize("command", [("memory",), ("time", "--hardware", "h100"), ("kvcache",), ("flops",)])
def test_every_bundled_model_under_a_layout_leaves_out_those_it_cannot_split(run, command):
    """No MODEL: every bundled model, a row for each the layout splits and a warning for each it cannot (falcon-7b's
    71 heads over tp 8); a model named is refused with the same rule; a layout no model takes is an error."""
    every = run(*command, "--tp", "8", "--seq", "4096", "--json")
    rows = {r["model"] for r in json.loads(every.stdout)}
    assert every.exit_code == 0 and "llama-3.1-70b" in rows and "falcon-7b" not in rows
    assert "Warning: left out: --tp 8 must divide the 71 attention heads of falcon-7b\n" in every.stderr
    named = run(*command, "falcon-7b", "--tp", "8", "--seq", "4096")
    assert (named.exit_code, named.stderr) == (2, "Error: --tp 8 must divide the 71 attention heads of falcon-7b\n")
    none = run(*command, "--tp", "7", "--seq", "4096")
    assert none.exit_code == 2 and none.stderr.startswith("Error: no bundled model takes tp 7 (the first: --tp 7 ")
