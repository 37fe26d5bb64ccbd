"""LoRA adapters: trainable parameters against closed forms and PEFT's own get_peft_model on
transformers' models (built on meta: no weights); FLOPs, saved bytes and training state against
closed forms and the reference model with adapters (analysis.verify.lora); QLoRA and the fit in a
GPU's memory."""

import json
import warnings

import pytest
import torch

import llmcalc.analysis.verify.report as report
from llmcalc.analysis.cluster.memory import fit, memory
from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.lora import adapter_params
from llmcalc.analysis.count.traffic import pass_bytes
from llmcalc.analysis.errors import SpecError
from llmcalc.analysis.load.catalog import load_bundled, load_model
from llmcalc.analysis.spec import Layout, LoRA, RunSpec, linear_keys, lora_refusal
from tests.strategies import CONFIGS

pytestmark = pytest.mark.reference

ATTENTION = "attention/q,attention/k,attention/v,attention/o"


def test_llama_2_7b_rank_16_on_attention(run):
    """r (d_in + d_out) per adapted matrix: 16 x (4,096 + 4,096) x 4 matrices x 32 layers."""
    data = json.loads(run("params", "llama-2-7b", "--lora-rank", "16", "--lora-targets", ATTENTION, "--json").stdout)
    lora = data["lora"]
    assert lora["trainable"] == 16 * (4096 + 4096) * 4 * 32 == 16_777_216
    assert lora["frozen"] == 6_738_415_616 and lora["scaling"] == 1.0
    assert lora["components"] == dict.fromkeys(ATTENTION.split(","), 16 * 8192 * 32)


def _peft_trainable(hf_model, **config) -> int:
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = get_peft_model(hf_model, LoraConfig(**config))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("rank, targets, modules", [
    (16, ATTENTION, ["q_proj", "k_proj", "v_proj", "o_proj"]),
    (8, "all-linear", "all-linear"),
])
def test_dense_adapters_match_peft(rank, targets, modules):
    """Llama 2 7B's and Mistral 7B's shapes (GQA: k and v are narrower) in transformers, adapted by PEFT."""
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    shapes = [("llama-2-7b", LlamaForCausalLM, LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                                                          num_hidden_layers=32, num_attention_heads=32,
                                                          num_key_value_heads=32)),
              ("mistral-7b", MistralForCausalLM, MistralConfig(vocab_size=32000, hidden_size=4096,
                                                               intermediate_size=14336, num_hidden_layers=32,
                                                               num_attention_heads=32, num_key_value_heads=8))]
    for name, cls, hf in shapes:
        with torch.device("meta"):
            model = cls(hf)
        ours = sum(adapter_params(load_model(name), LoRA(rank, tuple(targets.split(",")))).values())
        assert ours == _peft_trainable(model, r=rank, target_modules=modules), name


def test_all_linear_is_every_layer_linear():
    """Llama 2 7B, rank 8 on every linear of every layer: PEFT's well-known 19,988,480."""
    adapters = adapter_params(load_model("llama-2-7b"), LoRA(8, ("all-linear",)))
    assert sum(adapters.values()) == 8 * 32 * (4 * 2 * 4096 + 3 * (4096 + 11008)) == 19_988_480


@pytest.mark.parametrize("args, message", [
    (["gpt2-small", "--lora-rank", "8", "--lora-targets", "mlp/gate"],
     "--lora-targets mlp/gate: gpt2-small has no such linear to adapt"),
    (["gpt2-small", "--lora-alpha", "8"], "--lora-alpha and --lora-targets need --lora-rank"),
    (["gpt2-small", "--lora-rank", "0"], "Invalid value for '--lora-rank': must be >= 1, got 0"),
    (["gpt2-small", "--lora-rank", "8", "--lora-targets", ","],
     "Error: --lora-targets needs at least one breakdown key, or all-linear; none given\n"),
    (["gpt2-small", "--lora-rank", "8", "--lora-alpha", "-1"], "--lora-alpha must be a positive number"),
])
def test_lora_usage_errors_exit_2(run, args, message):
    result = run("params", *args)
    assert result.exit_code == 2 and message in result.output, result.output


# -- training with adapters ---------------------------------------------------------------------------

def test_llama_2_7b_training_state(run):
    """The bf16 base (2 bytes a parameter, no gradient, no optimizer) and 16 bytes per adapter
    parameter (bf16 weight and gradient, fp32 master and two Adam moments)."""
    data = json.loads(run("memory", "llama-2-7b", "--lora-rank", "16", "--lora-targets", ATTENTION, "--seq", "2048",
                          "--json").stdout)
    base, adapters = 6_738_415_616, 16_777_216
    assert (data["weights"], data["gradients"], data["optimizer"]) == (2 * (base + adapters), 2 * adapters,
                                                                       12 * adapters)
    assert data["weights"] + data["gradients"] + data["optimizer"] == 13_745_266_688
    assert data["lora"] == {"rank": 16, "alpha": 16, "scaling": 1.0, "targets": ATTENTION.split(",")}


def test_llama_2_7b_flops_closed_form():
    """Each frozen matmul runs forward and its input gradient (2x forward in all); an adapter's
    two matmuls run forward, then B's and A's weight gradients and input gradients (3x in all)."""
    T, d, r, L, f, V = 2048, 4096, 16, 32, 11008, 32000
    run = RunSpec("train", T, 1, "eager", lora=LoRA(r, tuple(ATTENTION.split(","))))
    flops = count_flops(load_model("llama-2-7b"), run).total.matmul
    linears = 2 * T * L * (4 * d * d + 3 * d * f)
    assert sum(flops[k] for k in ATTENTION.split(",") + ["mlp/up", "mlp/gate", "mlp/down"]) == 2 * linears
    assert sum(flops[k + "/lora"] for k in ATTENTION.split(",")) == 3 * 2 * T * L * 4 * r * (d + d)
    assert flops["lm_head"] == 2 * 2 * T * d * V
    assert flops["attention/scores"] == flops["attention/values"] == 3 * 2 * T * T * d * L  # eager: 3x forward


# recurrent mixers, hyper-connections (their coefficients' linears are parameters PEFT does not adapt) and Gemma
# 3n's layers (AltUp's and the per-layer inputs' matrices have no adapter targets yet) refuse LoRA
RECURRENT = {name for name, cfg in CONFIGS.items() if lora_refusal(cfg) is not None}


@pytest.mark.parametrize("name", sorted(set(CONFIGS) - RECURRENT))
def test_variants_against_the_reference_with_adapters(name):
    """Every variant config, adapters on its last two linears (MLP or experts): trainable
    parameters, FLOPs and saved bytes, eager and flash with each recomputation, fp32 Adam state."""
    cfg = CONFIGS[name]
    checks = report.lora_checks(cfg, 12, 2, LoRA(3, tuple(linear_keys(cfg)[-2:]), alpha=6))
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


@pytest.mark.parametrize("name", sorted(RECURRENT))
def test_adapters_on_a_recurrent_mixer_are_refused(name):
    """Adapters on a model with Mamba layers (or hyper-connections, or Gemma 3n's layers) are not modeled: refused,
    naming the option."""
    cfg = CONFIGS[name]
    refused = (r"adapters on (a model with ((mamba2?|short_conv|lightning|gated_deltanet|rglru|kda) layers|"
               r"hyper-connections \(hyper\))|Gemma 3n's layers \(gemma3n\)) are not modeled")
    with pytest.raises(SpecError, match=refused):
        count_flops(cfg, RunSpec("train", 12, 2, lora=LoRA(3, tuple(linear_keys(cfg)[-2:]), alpha=6)))


def test_verify_lora_dense_and_moe(run, config_file):
    """`verify --lora-rank 8` exits 0 on a dense model and on an MoE model with adapters per expert."""
    base = "vocab_size: 300\ncontext_length: 64\nd_model: 64\nn_layers: 2\nn_heads: 4\nd_ff: 96\n"
    dense = config_file("name: dense\n" + base, "dense.yaml")
    moe = config_file("name: moe\n" + base + "position: rope\nnorm: rmsnorm\nactivation: swiglu\n"
                      "moe: {num_experts: 4, experts_per_token: 2}\n", "moe.yaml")
    for model, targets in ((dense, "attention/q,attention/v"), (moe, "all-linear")):
        result = run("verify", model, "--lora-rank", "8", "--lora-targets", targets, "--seq", "32", "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["ok"] and any(c["name"] == "lora/params/total" for c in data["checks"])
    names = [c["name"] for c in data["checks"]]
    assert "lora/params/moe/experts/lora" in names and "lora/state/fp32 adam/optimizer" in names


def test_time_moves_what_lora_runs(run):
    """Bytes moved in a LoRA training step (analysis.traffic): an adapter's two matrices and their
    rows three times (forward, 2x backward); a frozen matrix twice (forward, input gradient); the
    optimizer step over the adapters only: read and write weights and state, read gradients."""
    T, d, r, L = 128, 4096, 16, 32
    data = json.loads(run("time", "llama-2-7b", "--hardware", "h100", "--seq", str(T), "--lora-rank", str(r),
                          "--json").stdout)
    parts = data["components"]
    assert parts["attention/q/lora"]["bytes"] == 3 * L * 2 * (r * (d + d) + T * (d + 2 * r + d))
    assert parts["attention/k"]["bytes"] == 2 * L * 2 * (d * d + T * (d + d))
    n = 2 * L * r * (d + d)  # adapter parameters: q and v
    assert parts["optimizer"]["bytes"] == 2 * (2 * n + 12 * n) + 2 * n
    assert data["lora"]["targets"] == ["attention/q", "attention/v"]


def test_qlora_memory(run):
    """nf4-dq weights under the adapters, and the dequantization transient: the largest matrix
    (Llama 3 8B's 4,096 x 14,336 MLP) expanded to bf16."""
    data = json.loads(run("memory", "llama-3-8b", "--lora-rank", "16", "--weights-dtype", "nf4-dq", "--seq", "512",
                          "--json").stdout)
    sizes = [(4096, 4096)] * 2 + [(4096, 1024)] * 2 + [(4096, 14336)] * 3  # q, o; k, v; up, gate, down
    n = [32 * i * o for i, o in sizes]  # every matrix a multiple of 64 x 256 values
    nf4_dq = sum(v // 2 + v // 64 + v // 64 // 256 * 4 + 32 * (16 + 256) * 4 for v in n)  # + 2 maps a matrix
    bf16 = 2 * (2 * 128256 * 4096 + 65 * 4096)  # embeddings, head, 65 norms
    adapters = 16 * 32 * ((4096 + 4096) + (4096 + 1024))
    assert data["weights"] == nf4_dq + bf16 + 2 * adapters
    assert data["dequantization"] == 2 * 4096 * 14336
    assert data["weights_dtype"] == "nf4-dq"


def test_largest_batch_that_fits():
    """fit() against memory() itself: the largest batch fits and one more does not."""
    cfg = load_model("llama-3-8b")
    run = RunSpec("train", 2048, 1, weights_dtype="nf4-dq", lora=LoRA(16))
    budget = 24 * 2**30
    f = fit(cfg, run, budget)
    assert f.max_batch >= 1 and f.fits
    assert memory(cfg, run.replace(batch=f.max_batch)).total <= budget
    assert memory(cfg, run.replace(batch=f.max_batch + 1)).total > budget
    assert fit(cfg, run.replace(lora=None, weights_dtype=None), budget).max_batch == 0  # 16 B/param: no


def test_memory_budget_cli(run):
    args = ("memory", "llama-3-8b", "--lora-rank", "16", "--weights-dtype", "nf4-dq", "--seq", "2048")
    data = json.loads(run(*args, "--hardware", "rtx-4090", "--json").stdout)
    budget = data["budget"]
    assert budget["bytes"] == 24 * 10**9 and budget["hardware"] == "rtx-4090"
    assert budget["fits"] == (data["total"] <= 24 * 10**9) and budget["free"] == 24 * 10**9 - data["total"]
    text = run(*args, "--budget", "24GiB").stdout
    assert "fits in 24.00 GiB: yes" in text and "the largest batch that fits: " in text


@pytest.mark.parametrize("args, message", [
    (("memory", "llama-2-7b", "--weights-dtype", "nf4"), "--weights-dtype nf4: training stores the weights in the"),
    (("memory", "llama-2-7b", "--mode", "inference", "--lora-rank", "8"),
     "--lora-rank applies to mode train only"),
    (("flops", "llama-2-7b", "--mode", "decode", "--lora-rank", "8"), "--lora-rank applies to mode train only"),
    (("time", "llama-2-7b", "--hardware", "h100", "--mode", "decode", "--lora-rank", "8"),
     "--lora-rank applies to mode train only"),
    (("time", "llama-2-7b", "--hardware", "h100", "--mode", "generate", "--prompt", "9", "--new", "9", "--lora-rank",
      "8"), "--lora-rank applies to mode train only"),
    (("time", "llama-2-7b", "--hardware", "h100", "--weights-dtype", "nf4"), "--weights-dtype nf4: training stores"),
    (("memory", "llama-2-7b", "--lora-rank", "8", "--weights-dtype", "gptq-int4", "--tp", "4"),
     "--tp 4 splits the 11,008 inputs of mlp/down into shards of 2,752"),  # 21.5 groups of 128
    (("memory", "llama-2-7b", "--budget", "24GiB", "--hardware", "h100"), "--budget and --hardware"),
    (("verify", "gpt2-small", "--lora-rank", "8", "--against", "transformers"), "not with --against"),
    (("flops", "gpt2-small", "--lora-rank", "8", "--lora-targets", "moe/experts"), "gpt2-small has no such linear"),
])
def test_training_usage_errors_exit_2(run, args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.output


def test_the_package_api_takes_lora():
    """``import llmcalc``: the README's LoRA run through the lazy API."""
    import llmcalc

    run = llmcalc.RunSpec(mode="train", seq=2048, lora=llmcalc.LoRA(16, tuple(ATTENTION.split(","))))
    parts = llmcalc.memory(llmcalc.load_model("llama-2-7b"), run).parts
    assert parts["weights"] + parts["gradients"] + parts["optimizer"] == 13_745_266_688


def test_full_training_on_stored_weights_is_refused_by_every_analysis():
    """Stored nf4 weights train only as LoRA's frozen base: memory and the bytes a step moves both
    refuse full training on them (one rule, in RunSpec.resolve), and accept it under adapters."""
    cfg = load_model("llama-2-7b")
    full, qlora = RunSpec("train", 128, 1, weights_dtype="nf4"), RunSpec("train", 128, 1, weights_dtype="nf4",
                                                                           lora=LoRA(8))
    for analysis in (memory, pass_bytes):
        with pytest.raises(SpecError, match=r"^weights_dtype nf4: training stores the weights in the compute dtype"):
            analysis(cfg, full)
    assert memory(cfg, qlora).parts["weights"] > 0 and sum(pass_bytes(cfg, qlora).values()) > 0


# -- adapters under a parallel layout (analysis.cluster.sharding: PEFT's LoraParallelLinear) ----------

QWEN_D, QWEN_KV, QWEN_FF, QWEN_L = 896, 128, 4864, 24  # qwen2.5-0.5b: d, KV width (2 x 64), d_ff, layers


def _adapters_per_gpu(r: int, tp: int, keys: tuple[str, ...]) -> int:
    """Written out: column-parallel q, k, v, gate, up keep A (r x d_in) whole and split B (d_out x r);
    row-parallel o, down split A and keep B whole."""
    d, kv, ff = QWEN_D, QWEN_KV, QWEN_FF
    per = {"attention/q": r * d + r * d // tp, "attention/k": r * d + r * kv // tp, "attention/v": r * d + r * kv // tp,
           "attention/o": r * d // tp + r * d, "mlp/gate": r * d + r * ff // tp, "mlp/up": r * d + r * ff // tp,
           "mlp/down": r * ff // tp + r * d}
    return QWEN_L * sum(per[k] for k in keys)


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("targets", [("attention/q", "attention/v"), ("all-linear",)])
def test_adapters_per_gpu_under_tp(tp, targets):
    from llmcalc.analysis.cluster.sharding import gpu_state

    cfg = load_bundled("qwen2.5-0.5b")
    keys = ("attention/q", "attention/k", "attention/v", "attention/o", "mlp/gate", "mlp/up", "mlp/down") \
        if targets == ("all-linear",) else targets
    state = gpu_state(cfg, Layout(tp=tp), 0, LoRA(16, targets))
    assert state.weights == state.gradients == state.optimizer == _adapters_per_gpu(16, tp, keys)
    assert state.frozen == gpu_state(cfg, Layout(tp=tp), 0).weights  # the base, as without LoRA
    if tp == 1:
        assert state.weights == sum(adapter_params(cfg, LoRA(16, targets)).values())


def test_memory_under_tp2_divides_the_single_gpu_state():
    """bf16 + Adam: 2 bytes of weights and gradients and 12 of optimizer state per adapter
    parameter, the frozen base's 2 bytes per parameter of the TP rank; ZeRO-1 over dp 4 shards the 12."""
    from llmcalc.analysis.cluster.sharding import gpu_state

    cfg, lora = load_bundled("qwen2.5-0.5b"), LoRA(16)
    one = memory(cfg, RunSpec("train", 1024, 1, lora=lora))
    two = memory(cfg, RunSpec("train", 1024, 1, lora=lora, layout=Layout(tp=2)))
    a1, a2 = _adapters_per_gpu(16, 1, lora.targets), _adapters_per_gpu(16, 2, lora.targets)
    # a TP rank's frozen base: half of Qwen2.5-0.5B's 494,032,768 parameters but the norms (2 x 896 a layer and
    # the final 896), which every rank holds whole; 2 KV heads over 2 ranks, one each
    base2 = (494_032_768 - (24 * 2 * 896 + 896)) // 2 + 24 * 2 * 896 + 896
    assert (one.parts["gradients"], one.parts["optimizer"]) == (2 * a1, 12 * a1)
    assert (two.parts["gradients"], two.parts["optimizer"], two.parts["weights"]) == (2 * a2, 12 * a2,
                                                                                       2 * base2 + 2 * a2)
    zero1 = memory(cfg, RunSpec("train", 1024, 1, lora=lora, layout=Layout(tp=2, dp=4, zero=1)))
    shards = gpu_state(cfg, Layout(tp=2, dp=4, zero=1), 0, lora).optimizer
    assert zero1.parts["optimizer"] == 12 * shards and a2 <= 4 * shards < a2 + 4 * 2 * QWEN_L * 16 * 2


def test_data_parallel_sends_only_the_adapters_gradients():
    from llmcalc.analysis.cluster.step import step
    from llmcalc.analysis.perf.hardware import load_hardware

    cfg, lora = load_bundled("qwen2.5-0.5b"), LoRA(16)
    s = step(cfg, RunSpec("train", 1024, 1, lora=lora, layout=Layout(tp=2, dp=2)), load_hardware("h100"))
    (dp,) = [c for c in s.collectives if c.group == "dp"]
    assert (dp.kind, dp.payload) == ("all-reduce", 2 * _adapters_per_gpu(16, 2, lora.targets))
    assert "attention/q/lora" in s.components  # the TP rank's LoRA pass: the frozen base and the adapters


def test_plan_takes_lora(run):
    data = json.loads(run("plan", "qwen3-30b-a3b", "--gpus", "8", "--hardware", "h100", "--seq", "4096",
                          "--global-batch", "64", "--lora-rank", "16", "--json").stdout)
    assert data["lora"]["rank"] == 16 and data["lora"]["targets"] == ["attention/q", "attention/v"]
    best = data["layouts"][0]
    assert best["fits"] and best["memory"] <= 80 * 10**9
    grads = [c for c in best["collectives"] if "gradients" in c["what"]]
    # the adapters' bf16 gradients alone, not the 30B base's: Qwen3-30B-A3B's 48 layers, d 2,048, q 32 x 128 and
    # v 4 x 128 wide (B split over tp), once a step or once a micro-batch (ZeRO-2/3)
    layout, r = best["layout"], 16
    adapters = 48 * (r * 2048 + r * 32 * 128 // layout["tp"] + r * 2048 + r * 4 * 128 // layout["tp"])
    assert grads and layout["pp"] == 1
    for c in grads:
        assert c["payload"] == 2 * adapters * (layout["micro_batches"] if c["per_micro_batch"] else 1), c
