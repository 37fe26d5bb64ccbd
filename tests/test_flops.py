"""FLOP accounting: published figures, closed forms and identities over random configs."""

import json

import pytest

from llmcalc.analysis.count.flops import FAMILIES, count_flops
from llmcalc.analysis.load.catalog import load_bundled
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.spec import RunSpec
from tests.strategies import CONFIGS

pytestmark = pytest.mark.unit


def test_gpt2_small_1024_forward_per_component():
    # Per-layer figures for GPT-2 small at 1,024 tokens (d=768, 12 heads, d_ff=3072),
    # counting 2 FLOPs per multiply-add: 2*1024*768*768*3 for q/k/v together, etc.
    r = count_flops(load_bundled("gpt2-small"), RunSpec("train", 1024, 1))
    per_layer = {k: v // 12 for k, v in r.forward.matmul.items() if k != "lm_head"}
    assert per_layer["attention/q"] + per_layer["attention/k"] + per_layer["attention/v"] == 3_623_878_656
    assert per_layer["attention/o"] == 1_207_959_552
    assert per_layer["attention/scores"] == per_layer["attention/values"] == 1_610_612_736
    assert per_layer["mlp/up"] == per_layer["mlp/down"] == 4_831_838_208
    assert r.forward.matmul["lm_head"] == 79_047_426_048
    assert r.forward.matmul_total == 291_648_307_200


def test_gpt2_xl_16k(run):
    result = run("flops", "gpt2-xl", "--seq", "16384", "--json")
    assert result.exit_code == 0
    assert "exceeds its context length (1,024)" in result.stderr
    data = json.loads(result.stdout)
    fwd = data["forward"]
    # 48 layers of d 1,600 (q, k, v, o and an MLP of 6,400) and dense attention over 16,384 tokens, the head
    L, d, f, V, T = 48, 1600, 6400, 50257, 16384
    dense = L * (2 * T * (4 * d * d + 2 * d * f) + 4 * T * T * d) + 2 * T * d * V
    assert fwd["matmul"] == dense
    attn = fwd["components"]["attention/scores"] + fwd["components"]["attention/values"]
    assert round(1000 * attn / fwd["matmul"]) == 618  # 61.8%
    assert attn > max(v for k, v in fwd["components"].items() if not k.startswith("attention/s")
                      and k != "attention/values")
    causal = json.loads(run("flops", "gpt2-xl", "--seq", "16384", "--causal", "--json").stdout)
    # causal: each of scores/values is 2*48*25*64*(16384*16385/2)
    tri = 16384 * 16385 // 2
    assert causal["forward"]["components"]["attention/scores"] == 2 * 48 * 25 * 64 * tri
    assert causal["forward"]["matmul"] == dense - 2 * 2 * 48 * 25 * 64 * (16384 ** 2 - tri)


def test_macs_are_half_the_matmul_flops_in_every_table(run):
    flops = json.loads(run("flops", "llama-3-8b", "mistral-7b", "--seq", "2048", "--json", "--exact").stdout)
    table = run("flops", "llama-3-8b", "mistral-7b", "--seq", "2048", "--macs", "--exact").stdout
    assert "matmul MACs" in table
    for rec in flops:
        assert f"{rec['total']['matmul'] // 2:,}" in table
    warned = run("flops", "llama-3-8b", "--seq", "2048", "--macs", "--json")
    assert warned.stderr == ("Warning: --macs shows the tables' matmul figures as multiply-accumulates; json keeps "
                             "FLOPs (MACs are matmul FLOPs / 2)\n")


def test_gpt2_xl_1k_to_16k():
    cfg = load_bundled("gpt2-xl")
    short, long = (count_flops(cfg, RunSpec("train", s)).forward for s in (1024, 16384))
    assert long.matmul["attention/scores"] == 256 * short.matmul["attention/scores"]
    assert round(long.matmul_total / short.matmul_total) == 38


def test_backward_linear_2x_attention_eager_2x_flash_2_5x():
    cfg = load_bundled("gpt2-small")
    w = RunSpec("train", 512, 2)
    eager, flash = (count_flops(cfg, w.replace(attention=a)) for a in ("eager", "flash"))
    for key, fwd in eager.forward.matmul.items():
        assert eager.backward.matmul[key] == 2 * fwd
    attn_fwd = eager.forward.matmul["attention/scores"] + eager.forward.matmul["attention/values"]
    assert 2 * (flash.backward.matmul_total - eager.backward.matmul_total) == attn_fwd
    rec = count_flops(cfg, w.replace(attention="eager", recompute="full"))
    layers = eager.forward.matmul_total - eager.forward.matmul["lm_head"]
    assert rec.backward.matmul_total - eager.backward.matmul_total == layers
    # selective: one more forward of eager attention's core; flash recomputes its scores already
    sel = count_flops(cfg, w.replace(attention="eager", recompute="selective"))
    assert sel.backward.matmul_total - eager.backward.matmul_total == attn_fwd
    flash_sel = count_flops(cfg, w.replace(attention="flash", recompute="selective"))
    assert (flash_sel.forward, flash_sel.backward) == (flash.forward, flash.backward)
    # op: one more forward of the linears it keeps no output of, the 2nd, 4th, ... of q, k, v, o, up, down,
    # and of eager attention's core; every linear with fp8 matmuls (none kept)
    rerun = sum(eager.forward.matmul[k] for k in ("attention/k", "attention/o", "mlp/down"))
    for attention, core in (("flash", 0), ("eager", attn_fwd)):
        base = count_flops(cfg, w.replace(attention=attention))
        op = count_flops(cfg, w.replace(attention=attention, recompute="op"))
        assert op.forward == base.forward
        assert op.backward.matmul_total - base.backward.matmul_total == rerun + core
    fp8 = count_flops(cfg, w.replace(recompute="op", dtype="fp8"))
    assert fp8.backward.matmul_total - flash.backward.matmul_total == layers - attn_fwd


def test_prefill_last_logits_and_decode():
    cfg = load_bundled("mistral-7b")
    pre = count_flops(cfg, RunSpec("prefill", 8192, 2))
    assert pre.forward.matmul["lm_head"] == 2 * 2 * 4096 * 32000
    assert count_flops(cfg, RunSpec("prefill", 8192, 2, all_logits=True)).forward.matmul["lm_head"] \
        == 2 * 2 * 8192 * 4096 * 32000
    assert pre.backward.total == 0
    # decode attends to min(seq, W) cached keys: the rolling buffer bounds it
    d8k, d100k = (count_flops(cfg, RunSpec("decode", s, 4)).forward.matmul for s in (8192, 100_000))
    assert d8k == d100k
    assert d8k["attention/scores"] == 2 * 4 * 32 * 4096 * 128 * 32
    d1k = count_flops(cfg, RunSpec("decode", 1000, 4)).forward.matmul
    assert d1k["attention/scores"] == 2 * 4 * 32 * 1000 * 128 * 32
    assert d1k["attention/q"] == 2 * 4 * 4096 * 4096 * 32


# a small dense MLA model: d 32, 4 heads, 2 layers, low-rank query of 16, latent of 12, nope 8, rope 4, values 6
MLA = dict(name="mla", vocab_size=61, context_length=64, d_model=32, n_layers=2, n_heads=4, d_ff=40,
           attention="mla", position="rope", norm="rmsnorm", activation="swiglu",
           mla={"q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6})


@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_mla_decode_is_absorbed_under_flash(attention):
    """A decode step at context S: under flash, absorbed as serving engines run it (kv_b's two halves on the
    new token's query and output, 2*B*h*r*(nope + v); the scores and values over the S cached latents, r + rope
    and r wide); eager decompresses every cached latent through kv_b (transformers), with the scores and values
    at nope + rope and v. Written out from the DeepSeek-V2 paper's and vLLM's shapes, per key over 2 layers."""
    cfg = from_dict(MLA)
    B, S, L, d, h, qr, r, nope, rope, v, f, V = 3, 20, 2, 32, 4, 16, 12, 8, 4, 6, 40, 61
    got = count_flops(cfg, RunSpec("decode", S, B, attention)).forward.matmul
    absorbed = attention == "flash"
    rows = B if absorbed else B * S  # kv_b: on the new tokens, or over every key
    score, value = (r + rope, r) if absorbed else (nope + rope, v)
    assert got == {"attention/q_a": L * 2 * B * d * qr, "attention/q_b": L * 2 * B * qr * h * (nope + rope),
                   "attention/kv_a": L * 2 * B * d * (r + rope), "attention/kv_b": L * 2 * rows * r * h * (nope + v),
                   "attention/o": L * 2 * B * h * v * d,
                   "mlp/up": L * 2 * B * d * f, "mlp/gate": L * 2 * B * d * f, "mlp/down": L * 2 * B * f * d,
                   "attention/scores": L * 2 * B * h * S * score, "attention/values": L * 2 * B * h * S * value,
                   "lm_head": 2 * B * d * V}
    # a prefill decompresses under flash as well; a one-token chunk after cached ones runs as a decode step
    prefill = count_flops(cfg, RunSpec("prefill", S, B, attention)).forward.matmul
    assert prefill["attention/kv_b"] == L * 2 * B * S * r * h * (nope + v)
    assert prefill["attention/scores"] == L * 2 * B * h * S * S * (nope + rope)
    chunk = count_flops(cfg, RunSpec("prefill", S, B, attention, past=S - 1)).forward.matmul
    assert {k: chunk[k] for k in ("attention/kv_b", "attention/scores", "attention/values")} == {
        k: got[k] for k in ("attention/kv_b", "attention/scores", "attention/values")}


@pytest.mark.parametrize("command", [("flops",), ("time", "--hardware", "h100")])
def test_titles_say_when_mla_decodes_absorbed(run, command):
    """The same breakdown keys mean the absorbed kernel under flash and transformers' decompression under eager:
    the title says which."""
    args = (command[0], "deepseek-v3", *command[1:], "--mode", "decode", "--seq", "4096")
    assert run(*args).stdout.splitlines()[0].endswith(", MLA absorbed")
    assert "absorbed" not in run(*args, "--attention", "eager").stdout.splitlines()[0]


def test_mixtral_experts_scale_with_top_k():
    cfg = load_bundled("mixtral-8x7b")
    w = RunSpec("train", 1024)
    top2 = count_flops(cfg, w).forward.matmul
    top1 = count_flops(cfg.replace(moe=cfg.moe.__class__(8, 1)), w).forward.matmul
    assert top2["moe/experts"] == 2 * top1["moe/experts"] == 2 * 2 * 1024 * 3 * 4096 * 14336 * 32
    assert top2["moe/router"] == 2 * 1024 * 4096 * 8 * 32


@pytest.mark.parametrize("args, message", [
    (["--seq", "0"], "Error: Invalid value for '--seq': must be >= 1, got 0\n"),
    (["--seq", "abc"], "Error: Invalid value for '--seq': expects a whole number such as 4096 or 128k, got 'abc'\n"),
    # a thousands separator, not the list 1 and 24 (a group starting with 0), nor 8 and 192 (a power of two)
    (["--seq", "1,024"], "Error: Invalid value for '--seq': a comma separates entries of a list, got '1,024': 1,024 "
                         "reads as one number with a thousands separator; write 1024 (or 1k-style: 32k, 128k), and a "
                         "space after each comma between entries (8, 192)\n"),
    (["--seq", "8,192"], "Error: Invalid value for '--seq': a comma separates entries of a list, got '8,192': 8,192 "
                         "reads as one number with a thousands separator; write 8192 (or 1k-style: 32k, 128k), and a "
                         "space after each comma between entries (8, 192)\n"),
    # within a longer list too
    (["--seq", "2,048,4096"], "Error: Invalid value for '--seq': a comma separates entries of a list, got "
                              "'2,048,4096': 2,048 reads as one number with a thousands separator; write 2048 (or "
                              "1k-style: 32k, 128k), and a space after each comma between entries (8, 192)\n"),
    (["--batch", "16,384,32,768"], "Error: Invalid value for '--batch': a comma separates entries of a list, got "
                                   "'16,384,32,768': 16,384 reads as one number with a thousands separator; write "
                                   "16384 (or 1k-style: 32k, 128k), and a space after each comma between entries "
                                   "(8, 192)\n"),
    (["--batch", "-1"], "Error: Invalid value for '--batch': must be >= 1, got -1\n"),
    (["--mode", "infer"], "Error: Invalid value for '--mode': 'infer' is not one of 'train', 'prefill', 'decode'.\n"),
    (["--attention", "sdpa"], "Error: Invalid value for '--attention': 'sdpa' is not one of 'eager', 'flash'.\n"),
])
def test_bad_options_exit_2(run, args, message):
    result = run("flops", "gpt2-small", *args)
    assert (result.exit_code, result.stderr) == (2, message)


def test_side_by_side_rows(run):
    result = run("flops", "gpt2-small", "--seq", "1024,4096,16384")
    assert result.exit_code == 0
    assert [line.split("│")[2].strip() for line in result.stdout.splitlines() if "gpt2-small" in line] \
        == ["1,024", "4,096", "16,384"]


@pytest.mark.parametrize("name", CONFIGS)
def test_families_partition_the_matmul_flops(name):
    """Every breakdown key falls in exactly one of the share columns' families (attention
    projections, scores+values, MLP or MoE, LM head), so the shares add up to 100%."""
    r = count_flops(CONFIGS[name], RunSpec("train", 64, 2)).total
    assert sum(r.family_matmul(f) for f in FAMILIES) == r.matmul_total
    mixer = ("mamba/conv1d", "mamba/scan", "mamba2/conv1d", "mamba2/scan", "short_conv/conv1d", "lightning/attention",
             "attention/scores", "attention/values", "gated_deltanet/conv1d", "gated_deltanet/scan")
    mixer += ("rglru/conv1d", "kda/conv1d", "kda/scan")
    mixer += ("attention/indexer",)  # DSA's indexer scores its keys
    assert r.family_matmul("attn scores+values") == sum(r.matmul.get(k, 0) for k in mixer)  # a hybrid has both kinds


@pytest.mark.parametrize("mode, option, layout", [
    ("decode", "--recompute full", ""), ("prefill", "--recompute selective", ""), ("train", "--all-logits", ""),
    ("decode", "--all-logits", ""), ("prefill", "--zero 1", "--dp 2")])  # --zero as memory and time ignore it
def test_an_option_of_another_mode_is_ignored_with_a_warning(run, mode, option, layout):
    args = ("flops", "gpt2-small", "--seq", "64", "--mode", mode, *layout.split())
    result = run(*args, *option.split(), "--json")
    option = option.split()[0]
    plain = run(*args, "--json")
    assert result.exit_code == 0 and result.stdout == plain.stdout  # nothing counted, nothing claimed
    assert result.stderr == f"Warning: {option} does not apply to --mode {mode}; ignored\n"


def test_a_comma_list_of_unlike_groups_is_a_list(run):
    """128,256 and 64,128 are sweeps (no group starts with 0, no power of two joined); a space after a comma makes
    any list one: 8, 192."""
    for text, seqs in (("128,256", [128, 256]), ("64,128", [64, 128]), ("8, 192", [8, 192])):
        data = json.loads(run("flops", "gpt2-small", "--seq", text, "--json").stdout)
        assert [r["seq_len"] for r in data] == seqs
