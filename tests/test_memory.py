"""`llmcalc memory`: training state, inference parts, JSON keys and bad input."""

import json

import pytest

from llmcalc.analysis.count.memory import trained_state
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.load.catalog import load_bundled
from llmcalc.analysis.spec import Layout, RunSpec

pytestmark = pytest.mark.unit

KEYS = {"weights", "gradients", "optimizer", "activations", "attention", "kv_cache", "logits", "total"}


@pytest.mark.parametrize("dtype, optimizer, per_param", [
    ("bf16", "adam", 16), ("bf16", "adamw", 16), ("fp16", "sgd", 8), ("bf16", "sgd-momentum", 12),
    ("fp32", "adam", 16), ("fp32", "sgd", 8), ("fp32", "sgd-momentum", 12)])
def test_training_state_bytes_per_parameter(dtype, optimizer, per_param):
    cfg = load_bundled("mistral-7b")
    s = trained_state(cfg, RunSpec("train", dtype=dtype, optimizer=optimizer).resolve(cfg))
    assert s.weights + s.gradients + s.optimizer == per_param * count_params(cfg).total


@pytest.mark.parametrize("options, positions", [
    ([], 1), (["--all-logits"], 8192), (["--all-logits", "--chunk", "1024"], 1024),
    (["--all-logits", "--cp", "2"], 4096), (["--all-logits", "--tp", "2"], 8192)])
def test_an_inference_holds_the_logits_it_returns(run, options, positions):
    """Llama 3 8B's bf16 logits over its 128,256-word vocabulary: the last position's, or with --all-logits
    (scoring a text) every position's a GPU computes at once: a chunk's, a context-parallel rank's S/cp, under TP
    the vocab-parallel head's all-gathered whole."""
    data = json.loads(run("memory", "llama-3-8b", "--mode", "inference", "--seq", "8192", *options, "--json").stdout)
    assert data["logits"] == positions * 128_256 * 2


def test_a_chunk_before_the_last_holds_no_logits():
    """A prefill's chunk before the last computes no logits (the API's ``logits=False``): its memory holds none,
    as its FLOPs count no LM head."""
    from llmcalc.analysis.cluster.memory import memory
    from llmcalc.analysis.count.flops import count_flops

    cfg = load_bundled("llama-3-8b")
    chunk = RunSpec("prefill", 64, 2, logits=False)
    assert memory(cfg, chunk).parts["logits"] == count_flops(cfg, chunk).forward.matmul.get("lm_head", 0) == 0
    assert memory(cfg, chunk.replace(logits=True)).parts["logits"] == 2 * 128_256 * 2


def test_mistral_train(run):
    result = run("memory", "mistral-7b", "--mode", "train", "--seq", "4096", "--json")
    data = json.loads(result.stdout)
    assert KEYS <= set(data) and data["kv_cache"] == 0
    n = 7_241_732_096
    assert (data["weights"], data["gradients"], data["optimizer"]) == (2 * n, 2 * n, 12 * n)
    assert data["activations"] == sum(v for k, v in data["activation_components"].items() if k != "loss")
    assert data["logits"] == data["activation_components"]["loss"]
    assert data["total"] == sum(data[k] for k in KEYS - {"total"})
    table = run("memory", "mistral-7b", "--mode", "train", "--seq", "4096").stdout
    for part in ("weights", "gradients", "optimizer", "activations", "total", "Korthikanti"):
        assert part in table


def test_recompute_keeps_less(run):
    """Eager attention: selective recomputation drops the B x h x S x S softmax (and keeps q, k,
    v, which it did not before); full recomputation keeps only the blocks' inputs."""
    none, selective, full = (json.loads(run("memory", "gpt2-small", "--seq", "1024", "--attention", "eager",
                                            "--recompute", r, "--json").stdout) for r in ("none", "selective", "full"))
    assert full["activations"] < selective["activations"] < none["activations"]
    h, S, L, b = 12, 1024, 12, 2
    # per layer the softmax output goes, and q, k, v (3 S d) replace the q and k copies and v (3 S d);
    # the checkpoints keep the causal mask, once
    assert none["activations"] - selective["activations"] == L * h * S * S * b - S * S * b
    # per-op checkpointing keeps a block's input and q, v and up's outputs (the 1st, 3rd and 5th of q, k,
    # v, o, up, down; up is 4 d wide): 6 S d a layer more than full recomputation's input alone
    op = json.loads(run("memory", "gpt2-small", "--seq", "1024", "--attention", "eager", "--recompute", "op",
                        "--json").stdout)
    assert op["activations"] - full["activations"] == L * 6 * S * 768 * b
    assert op["recompute"] == "op"


def test_inference_parts(run):
    data = json.loads(run("memory", "mistral-7b", "--mode", "inference", "--seq", "16384", "--chunk",
                          "4096", "--batch", "4", "--attention", "eager", "--json").stdout)
    assert (data["gradients"], data["optimizer"], data["activations"]) == (0, 0, 0)
    assert data["kv_cache"] == 4 * 4096 * (32 * 2 * 8 * 128 * 2)  # 4 x the 4,096-token window x 32 layers' K and V
    # one layer's scores and softmax output: 4 chunks of 4,096 queries x (4,096 cached + 4,096) keys
    assert data["attention"] == 2 * 4 * 32 * 4096 * 8192 * 2
    assert data["logits"] == 4 * 32000 * 2
    assert data["weights"] == 2 * 7_241_732_096


@pytest.mark.parametrize("args, message", [
    (["--chunk", "0"], "Error: Invalid value for '--chunk': must be >= 1, got 0\n"),
    (["--optimizer", "lion"],
     "Error: Invalid value for '--optimizer': 'lion' is not one of 'adam', 'adamw', 'sgd', 'sgd-momentum'.\n"),
    (["--mode", "serve"], "Error: Invalid value for '--mode': 'serve' is not one of 'train', 'inference'.\n"),
    (["--dtype", "int4"], "Error: Invalid value for '--dtype': 'int4' is not one of 'fp32', 'bf16', 'fp16', 'fp8'.\n"),
    (["--seq", "1,x"], "Error: Invalid value for '--seq': expects a whole number such as 4096 or 128k, got 'x'\n"),
    (["--grad-dtype", "fp8"], "Error: Invalid value for '--grad-dtype': 'fp8' is not one of 'fp32', 'bf16', 'fp16'.\n"),
])
def test_bad_input_exit_2(run, args, message):
    result = run("memory", "gpt2-small", *args)
    assert (result.exit_code, result.stderr) == (2, message)


def test_quantized_weights(tmp_path, run):
    # a model stored in int4 computes in bf16 by default; weights take half a byte each
    path = tmp_path / "q.yaml"
    path.write_text("name: q\nvocab_size: 1000\ncontext_length: 64\nd_model: 64\nn_layers: 2\n"
                    "n_heads: 4\nd_ff: 256\ndtype: int4\n")
    data = json.loads(run("memory", path, "--mode", "inference", "--seq", "64", "--json").stdout)
    assert (data["dtype"], data["weights_dtype"], data["kv_dtype"]) == ("bf16", "int4", "bf16")
    assert data["weights"] == 231_040 // 2
    mistral = json.loads(run("memory", "mistral-7b", "--mode", "inference", "--seq", "4096",
                             "--weights-dtype", "int4", "--json").stdout)
    assert mistral["weights"] == 7_241_732_096 // 2


def test_flash_training_total_counts_the_log_sum_exp_once(run):
    data = json.loads(run("memory", "gpt2-small", "--seq", "1024", "--json").stdout)
    assert data["attention"] == 0 and data["activation_components"]["attention/sdpa"] > 0


QUANTIZED = ("name: q\nvocab_size: 1000\ncontext_length: 64\nd_model: 64\nn_layers: 4\nn_heads: 4\nd_ff: 256\n"
             "position: rope\nsliding_window: 24\nlayer_types: [sliding, full]\ndtype: int4\n")


@pytest.mark.parametrize("model, options", [
    ("mistral-7b", []), ("mistral-7b", ["--dtype", "fp32"]), ("gpt2-small", ["--batch", "3", "--dtype", "fp16"]),
    ("mixtral-8x7b", ["--kv-dtype", "fp8"]), ("mixtral-8x7b", ["--weights-dtype", "int4"]),
    ("quantized", []), ("quantized", ["--kv-dtype", "int8", "--batch", "2"])])
def test_kvcache_and_inference_memory_agree(tmp_path, run, model, options):
    """Same model and options: the same KV bytes and dtype from both commands (one dtype policy)."""
    if model == "quantized":
        model = tmp_path / "q.yaml"
        model.write_text(QUANTIZED)
    kv = json.loads(run("kvcache", model, "--seq", "100", *options, "--json").stdout)
    mem = json.loads(run("memory", model, "--mode", "inference", "--seq", "100", *options, "--json").stdout)
    assert (kv["kv_dtype"], kv["bytes"]) == (mem["kv_dtype"], mem["kv_cache"])


def test_quantized_model_caches_in_the_compute_dtype(tmp_path, run):
    # 4 layers alternating a 24-token window and full attention, 4 heads of 16: K and V in bf16
    path = tmp_path / "q.yaml"
    path.write_text(QUANTIZED)
    kv = json.loads(run("kvcache", path, "--seq", "100", "--json").stdout)
    assert kv["kv_dtype"] == "bf16"
    assert kv["bytes"] == 2 * (24 + 100) * 2 * 64 * 2


@pytest.mark.parametrize("command", [("memory", "--mode", "inference"),
                                     ("time", "--hardware", "h100", "--mode", "decode")])
def test_grad_dtype_outside_training_is_ignored_with_a_warning(run, command):
    args = (command[0], "gpt2-small", *command[1:], "--seq", "256", "--json")
    result, plain = run(*args, "--grad-dtype", "fp32"), run(*args)
    assert result.exit_code == 0 and result.stdout == plain.stdout
    assert result.stderr == f"Warning: --grad-dtype does not apply to --mode {command[-1]}; ignored\n"


def test_grad_dtype_in_the_json_and_the_title(run):
    """The JSON names the gradients' dtype (null outside training); the title says it where it is not the
    compute dtype's."""
    fp32 = run("memory", "gpt2-small", "--seq", "256", "--grad-dtype", "fp32", "--json")
    data = json.loads(fp32.stdout)
    assert (data["grad_dtype"], data["gradients"]) == ("fp32", 4 * 124_439_808)
    assert json.loads(run("memory", "gpt2-small", "--seq", "256", "--json").stdout)["grad_dtype"] == "bf16"
    inference = run("memory", "gpt2-small", "--mode", "inference", "--seq", "256", "--json").stdout
    assert json.loads(inference)["grad_dtype"] is None
    assert "bf16, fp32 gradients" in run("memory", "gpt2-small", "--seq", "256", "--grad-dtype", "fp32").stdout


@pytest.mark.parametrize("model, recompute", [  # per-op checkpointing takes no recurrent mixer (docs: Conventions)
    (m, r) for m in ("llama-3.1-8b", "deepseek-v3", "gemma-3-27b", "qwen3-next-80b-a3b") for r in ("full", "op")
    if (m, r) != ("qwen3-next-80b-a3b", "op")])
def test_recomputation_holds_one_layer_saved_again(run, model, recompute):
    """Under --recompute full (or op) a GPU keeps each layer's input (and op some outputs) and, while backward
    reruns a layer, what that layer saves without recomputation beyond what it keeps (the same storage):
    `recomputed` is the largest of a layer's saves without recomputation less its saves with it, each the
    per-layer figure the reference checks (`activation_layer_groups`); nothing else changes but the kept
    activations."""
    args = ("memory", model, "--seq", "2048", "--batch", "2", "--json")
    kept = json.loads(run(*args, "--recompute", recompute).stdout)
    none = json.loads(run(*args).stdout)
    groups = none["activation_layer_groups"]
    assert kept["recomputed"] == max(groups[g] - kept["activation_layer_groups"][g] for g in groups) > 0
    assert none["recomputed"] == 0
    assert kept["total"] - kept["activations"] - kept["recomputed"] == none["total"] - none["activations"]


def test_full_recomputation_under_a_layout_holds_a_tp_ranks_layer():
    """On a GPU of tp 2 with sequence parallelism, the layer rerun is the TP rank's, split as its saves are:
    what a layer adds to the saves of Llama 3.1 8B without recomputation (the model against the same model one
    layer shorter, one stage, one micro-batch) less what it adds with full recomputation (its input)."""
    from llmcalc.analysis.cluster.memory import memory

    cfg = load_bundled("llama-3.1-8b")
    layout = Layout(tp=2, sp=True, micro_batches=1)
    full = memory(cfg, RunSpec("train", 4096, 2, recompute="full", layout=layout))
    layer = {r: memory(cfg, RunSpec("train", 4096, 2, recompute=r, layout=layout)).parts["activations"]
             - memory(cfg.replace(n_layers=cfg.n_layers - 1),
                      RunSpec("train", 4096, 2, recompute=r, layout=layout)).parts["activations"]
             for r in ("none", "full")}
    assert full.parts["recomputed"] == layer["none"] - layer["full"] > 0
