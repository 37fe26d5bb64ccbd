"""KV cache and attention working memory: public figures and closed forms."""

import json

import pytest

from llmcalc.analysis.count.kvcache import kv_cache
from llmcalc.analysis.count.memory import attention_bytes, attention_peak, chunk_spans
from llmcalc.analysis.load.catalog import load_bundled
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.spec import RunSpec

pytestmark = pytest.mark.unit


def kv(cfg, seq, batch, dtype):
    return kv_cache(cfg, RunSpec("decode", seq, batch, kv_dtype=dtype))


def test_llama2_7b_fp16_per_token():
    # 2 (K, V) * 32 layers * 4096 * 2 bytes = 524,288 bytes per token (0.5 MiB)
    assert kv(load_bundled("llama-2-7b"), 4096, 1, "fp16").bytes_per_token == 524_288


@pytest.mark.parametrize("seq", [4096, 4097, 8192, 32768, 1_000_000])
def test_mistral_rolling_buffer_caps_the_cache(seq):
    c = kv(load_bundled("mistral-7b"), seq, 1, "fp16")
    assert c.bytes_per_token == 131_072  # 2 * 32 * 8 KV heads * 128 * 2 bytes
    assert (c.cached_tokens, c.bytes) == (4096, 536_870_912)


def test_llama_13b_shape_vllm_figure(tmp_path, run):
    # vLLM blog: "up to 1.7GB for a single sequence in LLaMA-13B" at 2,048 tokens, fp16.
    path = tmp_path / "llama13b.yaml"
    path.write_text("name: llama-13b\nvocab_size: 32000\ncontext_length: 2048\nd_model: 5120\n"
                    "n_layers: 40\nn_heads: 40\nd_ff: 13824\nactivation: swiglu\nnorm: rmsnorm\n"
                    "position: rope\n")
    data = json.loads(run("kvcache", path, "--seq", "2048", "--kv-dtype", "fp16", "--json").stdout)
    assert data["bytes"] == 1_677_721_600


def test_mistral_budget(run):
    result = run("kvcache", "mistral-7b", "--seq", "8192", "--kv-dtype", "fp16", "--budget", "80GiB",
                 "--json")
    data = json.loads(result.stdout)
    assert (data["bytes"], data["cached_tokens"]) == (536_870_912, 4096)
    # the largest batch whose inference memory fits (as `memory --mode inference --budget`): bf16 weights,
    # then per sequence its cache, flash's fp32 log-sum-exp over 32 heads and its last position's logits:
    # (80 * 2^30 - 2 * 7,241,732,096) // (536,870,912 + 32 * 8,192 * 4 + 32,000 * 2) = 132;
    # the cache's tokens beside the weights: (80 * 2^30 - 2 * 7,241,732,096) // 131,072 = 544,859
    assert (data["max_batch"], data["max_tokens"]) == (132, 544_859)
    assert data["budget"] == 80 * 2**30


def _filled(budget, weights, per_sequence, state, per_token, cached):
    """Cached tokens a budget holds beside the weights, filled a sequence at a time (its cache and state),
    then one more sequence cut short, a token at a time."""
    used, tokens = weights, 0
    while used + per_sequence <= budget:
        used, tokens = used + per_sequence, tokens + cached
    if used + state <= budget:
        used += state
        extra = 0
        while extra < cached and used + per_token <= budget:
            used, extra = used + per_token, extra + 1
        tokens += extra
    return tokens


def test_gemma3s_budget_holds_sequences_whose_sliding_layers_stop_growing(run):
    """Gemma 3 27B at 32K: 52 sliding layers cache 1,024 tokens a sequence, 10 full ones all 32,768, 8 KiB a token
    a layer (2 x 16 KV heads x 128 x bf16): a sequence holds 52 x 1,024 x 8,192 + 10 x 32,768 x 8,192 bytes, so
    80 GiB beside the weights holds whole sequences of 32,768 tokens and part of one more, not
    (budget - weights) / 62 layers' bytes a token (62,769)."""
    data = json.loads(run("kvcache", "gemma-3-27b", "--seq", "32768", "--budget", "80GiB", "--json").stdout)
    per_sequence, per_token = 52 * 1024 * 8192 + 10 * 32768 * 8192, 62 * 8192
    assert (data["bytes"], data["bytes_per_token"]) == (per_sequence, per_token)
    assert data["max_tokens"] == _filled(80 * 2**30, data["weights_bytes"], per_sequence, 0, per_token, 32768)


# Granite 4.0-H Tiny: 36 Mamba-2 layers, each a conv state of K 4 x (E 3,072 + 2 G N 2 x 1 x 128) and an SSM
# state of 48 heads x 64 x N 128; 4 attention layers of 4 KV heads x 128; the checkpoint's 6,939,037,248
# parameters, bf16
GRANITE = dict(state=36 * (4 * (3072 + 2 * 128) + 48 * 64 * 128) * 2, per_token=4 * 2 * 4 * 128 * 2,
               weights=6_939_037_248 * 2)
# RecurrentGemma's class defaults: 18 RG-LRU layers, each a conv state of (4 - 1) x 2,560 and an h of 2,560;
# 8 local attention layers of 10 KV heads x 256 over a window of 2,048; 2,010,263,040 parameters
# (transformers' count: test_hf), bf16
RECURRENT_GEMMA = dict(state=18 * (3 + 1) * 2560 * 2, per_token=8 * 2 * 10 * 256 * 2, weights=2_010_263_040 * 2)


@pytest.mark.parametrize("model, seq, budget, sizes, cached, max_tokens", [
    ("granite-4.0-h-tiny", 256, 80 * 2**30, GRANITE, 256, None),
    # room for 3 sequences with their states, and the state and 100 tokens of a fourth
    ("granite-4.0-h-tiny", 256, 13_878_074_496 + 3 * (29_270_016 + 256 * 8192) + 29_270_016 + 100 * 8192, GRANITE,
     256, 3 * 256 + 100),
    ({"model_type": "recurrent_gemma"}, 8192, 80 * 2**30, RECURRENT_GEMMA, 2048, None),
])
def test_a_hybrid_models_budget_keeps_a_state_per_sequence(run, tmp_path, model, seq, budget, sizes, cached,
                                                            max_tokens):
    """With recurrent layers each sequence keeps a state: the cached tokens a budget holds are those of
    whole sequences of --seq tokens (their KV bound by the window) with their states, then of one more
    cut short, not tokens as if states cost nothing."""
    if isinstance(model, dict):
        (tmp_path / "config.json").write_text(json.dumps(model))
        model = str(tmp_path / "config.json")
    data = json.loads(run("kvcache", model, "--seq", str(seq), "--budget", f"{budget}B", "--json").stdout)
    state, per_token, weights = sizes["state"], sizes["per_token"], sizes["weights"]
    assert (data["state_bytes"], data["bytes_per_token"], data["cached_tokens"]) == (state, per_token, cached)
    assert (data["weights_bytes"], data["bytes"]) == (weights, state + cached * per_token)
    filled = _filled(budget, weights, state + cached * per_token, state, per_token, cached)
    assert data["max_tokens"] == filled == (max_tokens or filled)


@pytest.mark.parametrize("size, expected", [("80GiB", 80 * 2**30), ("80GB", 80 * 10**9),
                                            ("24GiB", 24 * 2**30), ("512MiB", 512 * 2**20),
                                            ("1.5GiB", 3 * 2**29)])
def test_budget_units(run, size, expected):
    data = json.loads(run("kvcache", "gpt2-small", "--budget", size, "--json").stdout)
    assert data["budget"] == expected


def test_weights_do_not_fit(run):
    result = run("kvcache", "mixtral-8x7b", "--budget", "40GB")
    assert result.exit_code == 0 and "weights do not fit" in result.stdout
    data = json.loads(run("kvcache", "mixtral-8x7b", "--budget", "40GB", "--json").stdout)
    assert (data["max_batch"], data["max_tokens"]) == (0, 0)


@pytest.mark.parametrize("args, message", [
    (["--budget", "12XB"],
     "Error: Invalid value for '--budget': expects a number with a byte unit, such as 80GiB or 80GB, got '12XB'\n"),
    (["--budget", "0GB"], "Error: Invalid value for '--budget': must be >= 1 byte, got '0GB'\n"),
    (["--kv-dtype", "fp12"],
     "Error: Invalid value for '--kv-dtype': 'fp12' is not one of 'fp32', 'fp16', 'bf16', 'fp8', 'int8', 'int4'.\n"),
    (["--seq", "0"], "Error: Invalid value for '--seq': must be >= 1, got 0\n"),
])
def test_bad_sizes_exit_2(run, args, message):
    result = run("kvcache", "gpt2-small", *args)
    assert (result.exit_code, result.stderr) == (2, message)


def test_budget_of_a_model_caching_no_token(tmp_path, run):
    """Every layer a mamba state, constant in the context: no token is cached, so no count of tokens fits
    beside the weights (max_tokens null, "-"), while the largest batch still does."""
    path = tmp_path / "mamba.yaml"
    path.write_text("name: mamba-tiny\nvocab_size: 10\ncontext_length: 8\nd_model: 16\nn_layers: 2\nn_heads: 2\n"
                    "d_ff: 0\nposition: none\nnorm: rmsnorm\nlayer_types: [mamba]\ntie_embeddings: true\n"
                    "mamba: {d_state: 4, d_conv: 3, expand: 2, dt_rank: 5}\n")
    data = json.loads(run("kvcache", path, "--budget", "1MiB", "--json").stdout)
    assert (data["bytes_per_token"], data["max_tokens"]) == (0, None) and data["max_batch"] > 0
    assert run("kvcache", path, "--budget", "1MiB").stdout.splitlines()[-2].split("│")[-2].strip() == "-"


def test_gqa_and_head_dim():
    base = dict(name="t", vocab_size=10, context_length=8, d_model=64, n_layers=3, n_heads=8, d_ff=8)
    mha = kv(from_dict(base), 100, 2, "fp32")
    gqa = kv(from_dict({**base, "n_kv_heads": 2}), 100, 2, "fp32")
    mqa = kv(from_dict({**base, "n_kv_heads": 1, "head_dim": 24}), 100, 2, "fp32")
    assert mha.bytes == 2 * 3 * 2 * 8 * 8 * 100 * 4 == 4 * gqa.bytes
    assert mqa.bytes == 2 * 3 * 2 * 1 * 24 * 100 * 4
    assert mha.bytes_per_layer * 3 == mha.bytes


def test_eager_grows_256x_flash_16x():
    cfg = load_bundled("gpt2-xl")
    eager = [attention_bytes(cfg, 1, s, s, "eager", "bf16") for s in (1024, 16384)]
    flash = [attention_bytes(cfg, 1, s, s, "flash", "bf16") for s in (1024, 16384)]
    assert eager[1] == 256 * eager[0] == 256 * 2 * 25 * 1024 * 1024 * 2
    assert flash[1] == 16 * flash[0] == 16 * 25 * 1024 * 4


def test_chunked_prefill_spans_and_peak():
    cfg = load_bundled("mistral-7b")  # W = 4096, 32 heads
    assert chunk_spans(cfg, 16384, 4096) == [(4096, 8192), (4096, 8192)]
    assert chunk_spans(cfg, 5000, 1000) == [(1000, 4000), (1000, 5000)]
    assert chunk_spans(cfg, 100, None) == [(100, 100)]
    assert chunk_spans(cfg.replace(sliding_window=None), 16384, 4096)[-1] == (4096, 16384)
    # a short last chunk: eager peaks there (more keys), flash at the last full chunk (more queries)
    llama = load_bundled("llama-2-7b")
    assert chunk_spans(llama, 8191, 4096) == [(4096, 4096), (4095, 8191)]
    run = RunSpec("prefill", 8191, 1, chunk=4096, dtype="bf16")
    assert attention_peak(llama, run.replace(attention="flash")) == (32 * 4096 * 4, 4096, 4096)
    assert attention_peak(llama, run.replace(attention="eager")) == (2 * 32 * 4095 * 8191 * 2, 4095, 8191)


def test_training_attention_is_only_the_extra_scores():
    cfg = load_bundled("gpt2-small")
    assert attention_bytes(cfg, 8, 1024, 1024, "flash", "bf16", training=True) == 0
    assert attention_bytes(cfg, 8, 1024, 1024, "eager", "bf16", training=True) == 8 * 12 * 1024 * 1024 * 2


MIXED = dict(name="t", vocab_size=10, context_length=64, d_model=64, n_layers=5, n_heads=8, n_kv_heads=2, d_ff=8)


@pytest.mark.parametrize("seq", [1, 7, 8, 9, 100])
def test_each_layer_caches_its_own_window(seq):
    # layers 0, 2, 3 slide over 8 tokens ([sliding, full, sliding] repeated), layers 1 and 4 keep all
    cfg = from_dict({**MIXED, "sliding_window": 8, "layer_types": ["sliding", "full", "sliding"]})
    c = kv(cfg, seq, 3, "bf16")
    assert c.bytes == 3 * (3 * min(seq, 8) + 2 * seq) * 2 * 2 * 8 * 2
    assert c.bytes_per_token == 5 * 2 * 2 * 8 * 2  # every layer, while no window binds
    assert c.cached_tokens == seq  # the full layers hold the whole sequence


def test_mla_caches_the_latent_and_one_rope_key():
    cfg = from_dict({**{k: v for k, v in MIXED.items() if k != "n_kv_heads"}, "attention": "mla",
                     "mla": {"kv_lora_rank": 12, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4,
                             "v_head_dim": 5}})
    c = kv(cfg, 33, 2, "fp32")
    assert c.bytes_per_token == 5 * (12 + 4) * 4
    assert c.bytes == 2 * 33 * 5 * (12 + 4) * 4


def test_chunked_prefill_follows_each_layers_window():
    cfg = from_dict({**MIXED, "sliding_window": 4096, "layer_types": ["sliding", "full"],
                     "context_length": 16384})
    # chunks at offsets 8192 and 12288: sliding layers see min(o, 4096) + 4096 keys, full ones o + 4096
    assert sorted(chunk_spans(cfg, 16384, 4096)) == [(4096, 8192), (4096, 8192), (4096, 12288), (4096, 16384)]
    run = RunSpec("prefill", 16384, 1, chunk=4096, dtype="bf16")
    assert attention_peak(cfg, run.replace(attention="eager")) == (2 * 8 * 4096 * 16384 * 2, 4096, 16384)
    # decode: one query against the longest layer's cache
    assert attention_peak(cfg, RunSpec("decode", 16384, 1, attention="eager", dtype="bf16")) == \
        (2 * 8 * 16384 * 2, 1, 16384)


def test_budget_weights_dtype_and_compute_dtype(run):
    """--weights-dtype sizes the weights for --budget; --dtype is the compute dtype, which the
    cache follows unless --kv-dtype is given (as in `memory`)."""
    data = json.loads(run("kvcache", "mistral-7b", "--seq", "8192", "--budget", "80GiB",
                          "--weights-dtype", "int4", "--dtype", "fp32", "--json").stdout)
    assert (data["weights_dtype"], data["weights_bytes"]) == ("int4", 7_241_732_096 // 2)
    assert (data["kv_dtype"], data["bytes"]) == ("fp32", 4096 * 32 * 2 * 8 * 128 * 4)
    result = run("kvcache", "mistral-7b", "--dtype", "int4")
    assert (result.exit_code, result.stderr) == (
        2, "Error: Invalid value for '--dtype': 'int4' is not one of 'fp32', 'bf16', 'fp16', 'fp8'.\n")


@pytest.mark.parametrize("args", [("--seq", "4096"), ("--seq", "32768", "--kv-dtype", "fp8"),
                                  ("--seq", "8192", "--weights-dtype", "nf4-dq", "--dtype", "fp16")])
def test_kvcache_and_memory_agree_on_the_largest_batch(run, args):
    """One definition of the largest batch that fits (analysis.cluster.memory.fit): kvcache --budget
    and memory --mode inference --budget give the same for every bundled model."""
    kv = json.loads(run("kvcache", *args, "--budget", "80GiB", "--json").stdout)
    mem = json.loads(run("memory", "--mode", "inference", *args, "--budget", "80GiB", "--json").stdout)
    assert [r["max_batch"] for r in kv] == [m["budget"]["max_batch"] for m in mem]
    assert [r["model"] for r in kv] == [m["model"] for m in mem] and len(kv) > 20


def test_hybrid_state_is_constant_in_seq_while_kv_grows(run):
    """Jamba (docs/examples/jamba-mini, AI21-Jamba-1.5-Mini's config.json): 4 attention layers keep
    K and V per token (8 KV heads of 128), 28 mamba layers a state per sequence, E * (d_conv + d_state)
    values (E = 2 * 4096, 4 + 16), whatever --seq."""
    result = run("kvcache", "docs/examples/jamba-mini/config.json", "--seq", "4096,262144", "--batch", "2", "--json")
    assert result.exit_code == 0, result.stderr
    short, long = json.loads(result.stdout)
    state = 28 * 2 * 8192 * (4 + 16) * 2  # layers x batch x values x bf16
    assert short["state_bytes"] == long["state_bytes"] == state == 18_350_080
    for out in (short, long):
        assert out["kv_bytes"] == 4 * 2 * out["seq_len"] * 2 * 8 * 128 * 2  # layers x batch x tokens x K, V
        assert out["bytes"] == out["kv_bytes"] + out["state_bytes"]
    assert long["kv_bytes"] == 64 * short["kv_bytes"]


@pytest.mark.parametrize("command", [("kvcache",), ("memory", "--mode", "inference"),
                                     ("time", "--hardware", "h100", "--mode", "decode")])
def test_a_state_dtype_for_a_model_without_recurrent_state_warns(run, command):
    result = run(command[0], "llama-3-8b", *command[1:], "--seq", "512", "--state-dtype", "fp32")
    assert result.exit_code == 0
    assert result.stderr == "Warning: --state-dtype: llama-3-8b keeps no recurrent state; ignored\n"


def test_weights_dtype_without_a_budget_warns_that_it_is_ignored(run):
    result = run("kvcache", "llama-2-7b", "--seq", "512", "--weights-dtype", "nf4")
    assert result.exit_code == 0 and result.stderr == (
        "Warning: --weights-dtype sizes the weights beside the cache under --budget; ignored without it\n")


def test_images_without_seq_fill_the_context_beside_the_text(run):
    """No --seq: the sequence is the context length (131,072 for Gemma 3 27B), the text what 4 images of
    256 tokens (an 896-pixel image, Gemma 3's model card) leave of it; a --seq past it with the images warns."""
    result = run("kvcache", "gemma-3-27b-it", "--images", "4", "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    record = json.loads(result.stdout)
    assert (record["seq_len"], record["text_tokens"], record["image_tokens"]) == (131_072, 131_072 - 4 * 256, 256)
    result = run("kvcache", "gemma-3-27b-it", "--images", "1", "--seq", "130817")
    assert (result.exit_code, result.stderr) == (0, "Warning: gemma-3-27b-it: --seq + --images 131,073 exceeds its "
                                                    "context length (131,072); computing anyway\n")
    assert run("kvcache", "gemma-3-27b-it", "--images", "1", "--seq", "130816").stderr == ""
    resolved = RunSpec("prefill", images=4).resolve(load_bundled("gemma-3-27b-it"))  # the API's default alike
    assert (resolved.seq, resolved.text) == (131_072, 131_072 - 4 * 256)
    assert run("kvcache", "gemma-3-27b-it", "--images", "512").stderr == (
        "Error: --images 512 of 256 tokens each fill gemma-3-27b-it's context length (131,072), leaving no text: "
        "give the text's tokens (--seq)\n")


@pytest.mark.parametrize("option, code, stderr", [
    ("--zero 1", 0, "Warning: --zero does not apply to a decode's KV cache; ignored\n"),
    ("--cp 2", 2, "Error: --cp 2: context parallelism splits a sequence's new tokens, and a decode step has one\n"),
    ("--lora-rank 8", 2, "Error: --lora-rank applies to mode train only\n")])
def test_the_run_specs_options_go_as_a_decode_takes_them(run, option, code, stderr):
    """DESIGN.md section 5: every command of a workload takes the layout and LoRA options; the cache is a decode's."""
    result = run("kvcache", "mistral-7b", "--seq", "4096", "--dp", "2", *option.split())
    assert (result.exit_code, result.stderr) == (code, stderr)
    if code == 0:
        assert result.stdout == run("kvcache", "mistral-7b", "--seq", "4096", "--dp", "2").stdout


def test_a_budget_with_images_is_refused_naming_what_takes_them(run):
    result = run("kvcache", "gemma-3-27b-it", "--images", "2", "--budget", "80GiB")
    assert (result.exit_code, result.stderr) == (2, "Error: --images (the vision tower's activations, bytes moved and "
                                                    "time) are not counted by memory, time and plan yet: flops and "
                                                    "kvcache (without --budget) take images\n")
    assert run("kvcache", "gemma-3-27b-it", "--images", "2").exit_code == 0


def test_a_layout_gives_one_gpus_cache(run):
    """--tp splits the KV heads (one replicated a GPU past them), --pp the layers (GPT-2 small over 2 stages: 6
    layers each), the JSON adds the layout and every stage's bytes."""
    mistral = json.loads(run("kvcache", "mistral-7b", "--tp", "16", "--json").stdout)  # 8 KV heads of 128
    assert (mistral["bytes_per_token"], mistral["bytes"]) == (32 * 2 * 1 * 128 * 2, 32 * 4096 * 2 * 128 * 2)
    gpt2 = json.loads(run("kvcache", "gpt2-small", "--seq", "1024", "--batch", "2", "--tp", "2", "--pp", "2",
                          "--json").stdout)
    per_layer = 2 * 6 * 64 * 4  # K and V of 6 of its 12 heads of 64, in its fp32
    assert (gpt2["gpus"], gpt2["stage"], gpt2["stage_totals"]) == (4, 0, [6 * 2 * 1024 * per_layer] * 2)
    assert (gpt2["bytes_per_token"], gpt2["bytes"]) == (6 * per_layer, 6 * 2 * 1024 * per_layer)
    assert [g["layers"] for g in gpt2["layer_groups"]] == [[0, 1, 2, 3, 4, 5]]
    refused = run("kvcache", "gpt2-small", "--tp", "5")
    assert (refused.exit_code, refused.stderr) == (
        2, "Error: --tp 5 must divide the 12 attention heads of gpt2-small\n")


def test_a_layouts_budget_is_each_gpus(run):
    """Llama 3.1 70B at --tp 8 in 80 GB a GPU: the tokens that fit beside a GPU's weights (memory's) at 80 layers x
    K and V of its one KV head of 128 in bf16, and the largest batch memory fits."""
    args = ("llama-3.1-70b", "--seq", "32768", "--tp", "8")
    served = json.loads(run("kvcache", *args, "--budget", "80GB", "--json").stdout)
    sized = json.loads(run("memory", *args, "--mode", "inference", "--json").stdout)
    assert served["weights_bytes"] == sized["weights"]
    assert served["max_tokens"] == (80 * 10**9 - sized["weights"]) // (80 * 2 * 128 * 2)
    fitted = json.loads(run("memory", *args, "--mode", "inference", "--budget", "80GB", "--json").stdout)
    assert served["max_batch"] == fitted["budget"]["max_batch"]


def test_a_pipelines_budget_is_its_tightest_stages(run):
    """Llama 3.1 70B at --tp 2 --pp 3 in 80 GiB a GPU: each stage's GPUs hold (80 GiB - their weights) //
    (their layers x K and V of 4 KV heads of 128 in bf16) tokens; the fewest are reported, with that stage."""
    from llmcalc.analysis.cluster.sharding import stages
    from llmcalc.analysis.spec import Layout

    args = ("llama-3.1-70b", "--seq", "8192", "--tp", "2", "--pp", "3")
    layers = [len(s) for s in stages(load_bundled("llama-3.1-70b"), Layout(pp=3))]
    weights = [json.loads(run("memory", *args, "--mode", "inference", "--stage", str(s), "--json").stdout)["weights"]
               for s in range(3)]
    tokens = [(80 * 2**30 - w) // (n * 2 * 4 * 128 * 2) for w, n in zip(weights, layers)]
    served = json.loads(run("kvcache", *args, "--budget", "80GiB", "--json").stdout)
    stage = tokens.index(min(tokens))
    assert (served["max_tokens"], served["budget_stage"], served["weights_bytes"]) == (min(tokens), stage,
                                                                                     weights[stage])


def test_data_parallel_gpus_keep_their_own_cache_and_experts_shrink_the_weights(run):
    """--dp leaves a GPU's cache that of its own batch; --ep deals Mixtral's 8 experts out, so the tokens that fit
    beside a GPU's weights grow (32 layers x K and V of 8 KV heads of 128 in bf16 a token)."""
    one = json.loads(run("kvcache", "mixtral-8x7b", "--seq", "4096", "--batch", "4", "--budget", "80GB",
                         "--json").stdout)
    split = json.loads(run("kvcache", "mixtral-8x7b", "--seq", "4096", "--batch", "4", "--budget", "80GB", "--dp", "4",
                           "--ep", "4", "--json").stdout)
    assert split["bytes"] == one["bytes"] == 32 * 4 * 4096 * 2 * 8 * 128 * 2
    held = json.loads(run("memory", "mixtral-8x7b", "--mode", "inference", "--seq", "4096", "--dp", "4", "--ep", "4",
                          "--json").stdout)["weights"]
    assert split["weights_bytes"] == held < one["weights_bytes"]
    assert split["max_tokens"] == (80 * 10**9 - held) // (32 * 2 * 8 * 128 * 2)
