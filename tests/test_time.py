"""`llmcalc time`: bytes moved, the roofline, generation and MFU (DESIGN.md section 8).

Closed forms are written here from the hardware's datasheet figures and the models' published
sizes; the keys flash attention reads are checked against a loop over the queries."""

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.traffic import attended_span, pass_bytes
from llmcalc.analysis.load.catalog import load_bundled
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.perf.hardware import load_hardware
from llmcalc.analysis.perf.roofline import generate, prefill, roofline, utilization
from llmcalc.analysis.spec import Layout, RunSpec
from tests.strategies import valid_configs

pytestmark = pytest.mark.unit

H100 = load_hardware("h100")
BW, BF16 = 3_350_000_000_000, 989_400_000_000_000  # the H100 SXM datasheet: 3.35 TB/s, 989.4 TFLOP/s


def test_h100_is_its_datasheet():
    assert (H100.memory, H100.memory_bandwidth, H100.peak("bf16")) == (80 * 10**9, BW, BF16)


def test_decode_is_memory_bound_weights_plus_kv_over_bandwidth():
    """Mistral 7B (7,241,732,096 parameters in bf16) at 4,096 tokens of context reads its
    weights and its 32 layers x 8 K/V heads x 128 x 2 (K and V) x 2 bytes x 4,096 tokens cache."""
    r = roofline(load_bundled("mistral-7b"), RunSpec("decode", 4096, 1), H100)
    weights, kv = 7_241_732_096 * 2, 32 * 8 * 128 * 2 * 2 * 4096
    embedding = 32000 * 4096 * 2  # of the table it reads one row
    assert r.bound == "memory"
    assert r.bytes == sum(MISTRAL_DECODE_BYTES(1, 4096).values())
    assert weights - embedding + kv < r.bytes < weights - embedding + kv + 20 * 2**20  # the token's activations
    # every component that moves bytes is memory-bound; flash's fused softmax and scale move none of their own
    # and run at the fp32 peak (elementwise work)
    assert all(c.time_s == c.bytes / BW for c in r.components.values() if c.bytes)
    fused = [c for c in r.components.values() if not c.bytes]
    assert len(fused) == 2 and all(c.time_s == c.flops / 66_900_000_000_000 for c in fused)
    assert r.time_s == pytest.approx(r.bytes / BW + sum(c.time_s for c in fused), rel=1e-12)


def MISTRAL_DECODE_BYTES(B, seq):  # noqa: N802 (a table of closed forms)
    """The bytes one decode step of Mistral 7B moves, by component, written out from the conventions
    (docs: Conventions, Time and bytes moved): d 4,096, 32 heads and 8 K/V heads of 128, a gated SiLU
    MLP of 14,336, 32 layers, 32,000 tokens, an untied head, a 4,096-token sliding window; bf16
    (2 bytes) throughout. A linear reads its weights and writes its output rows; flash attention reads
    Q, the K and V rows its query attends to (the window's) and writes O."""
    d, h, g, hd, f, L, V, W, b = 4096, 32, 8, 128, 14336, 32, 32000, 4096, 2
    span = min(seq, W)
    linear = lambda d_in, d_out: L * (d_in * d_out + B * (d_in + d_out)) * b  # noqa: E731
    return {"attention/q": linear(d, h * hd), "attention/k": linear(d, g * hd), "attention/v": linear(d, g * hd),
            "attention/o": linear(h * hd, d),
            "mlp/up": linear(d, f), "mlp/gate": linear(d, f), "mlp/down": linear(f, d),
            "attention/scores": L * B * (h * hd + g * span * hd) * b,
            "attention/values": L * B * (g * span * hd + h * hd) * b,
            "norm": (2 * L + 1) * B * d * 2 * b,  # two RMSNorms a layer and the final one: read, write
            "attention/rope": L * B * (h + g) * hd * 2 * b,  # q and k: read, write
            "activation": L * B * f * 3 * b,  # silu(gate) * up: two reads, a write
            "residual": L * 2 * B * d * 3 * b,  # two adds a layer
            "kv_cache": L * B * 2 * g * hd * b,  # the new token's K and V written
            "embedding": B * d * b + B * d * b,  # its row read, the activation written
            "lm_head": d * V * b + B * (d + V) * b}


@pytest.mark.parametrize("held, experts, k, tokens", [(4, 4, 2, 1), (4, 4, 2, 3), (6, 6, 1, 4), (5, 5, 3, 2),
                                                     (8, 8, 2, 2), (2, 4, 1, 3), (3, 6, 2, 2)])
def test_experts_reached_is_the_mean_over_every_routing(held, experts, k, tokens):
    """The routed experts a pass reads: over every way ``tokens`` tokens can each choose ``k`` distinct experts of
    ``experts``, all alike, the mean number of the first ``held`` (a GPU's, under expert parallelism) some token
    chose, rounded half up (8 experts, top 2, two tokens: 3.5, read as 4)."""
    import itertools
    import math
    from fractions import Fraction

    from llmcalc.analysis.count.flops import experts_reached

    choices = list(itertools.combinations(range(experts), k))
    reached = sum(len({e for pick in picks for e in pick if e < held})
                  for picks in itertools.product(choices, repeat=tokens))
    mean = Fraction(reached, len(choices) ** tokens)
    assert experts_reached(held, experts, k, tokens) == math.floor(mean + Fraction(1, 2))


@pytest.mark.parametrize("B, seq", [(1, 4096), (4, 8192)])
def test_decode_bytes_are_the_closed_forms_component_by_component(B, seq):
    """At 8,192 tokens of context the window still reads 4,096 K/V rows."""
    assert pass_bytes(load_bundled("mistral-7b"), RunSpec("decode", seq, B)) == MISTRAL_DECODE_BYTES(B, seq)


def GPT2_SMALL_BYTES(mode, B, S):  # noqa: N802 (a table of closed forms)
    """The bytes a GPT-2 small pass moves, by component, from the conventions: d 768, 12 heads of 64, a
    GELU MLP of 3,072, 12 layers, 50,257 tokens, 1,024 learned positions, a head tied to the embedding,
    biases on every linear and LayerNorm (a linear reads its bias with its weights; the add is fused).
    A prefill computes in the checkpoint's fp32 and keeps the last token's logits (the final norm and
    the head over B rows) and writes the KV cache; training computes in bf16 over every token, moves
    three forwards (backward is twice the forward) and the optimizer step: bf16 weights and gradients,
    fp32 master weights and two moments, 30 bytes a parameter."""
    d, h, hd, f, L, V, P = 768, 12, 64, 3072, 12, 50257, 124_439_808
    b, T = (4 if mode == "prefill" else 2), B * S
    n = B if mode == "prefill" else T  # the rows the final norm and the head run over
    linear = lambda d_in, d_out: L * (d_in * d_out + d_out + T * (d_in + d_out)) * b  # noqa: E731
    forward = {"attention/q": linear(d, d), "attention/k": linear(d, d), "attention/v": linear(d, d),
               "attention/o": linear(d, d), "mlp/up": linear(d, f), "mlp/down": linear(f, d),
               "attention/scores": L * B * (S * h * hd + h * S * hd) * b,  # Q, then every K row once
               "attention/values": L * B * (h * S * hd + S * h * hd) * b,  # every V row once, then O
               "norm": (2 * L * T + n) * d * 2 * b,
               "activation": L * T * f * 2 * b,  # gelu: a read, a write
               "residual": L * 2 * T * d * 3 * b,
               "embedding": T * d * b + T * d * b,
               "position": T * d * 3 * b,  # the token's and the position's rows read, their sum written
               "lm_head": V * d * b + n * (d + V) * b}  # the embedding's table, then the rows
    if mode == "prefill":
        return forward | {"kv_cache": L * T * 2 * d * b}
    return {key: 3 * n for key, n in forward.items()} | {"optimizer": 30 * P}


@pytest.mark.parametrize("mode", ["prefill", "train"])
def test_prefill_and_train_bytes_are_the_closed_forms_component_by_component(mode):
    assert pass_bytes(load_bundled("gpt2-small"), RunSpec(mode, 1024, 2)) == GPT2_SMALL_BYTES(mode, 2, 1024)


def test_long_prefill_is_compute_bound_flops_over_peak():
    """GPT-2 XL computes in its own fp32: matmuls and elementwise work at the fp32 peak, 66.9
    TFLOP/s on an H100 SXM. Each matrix is compute-bound at FLOPs / peak; the whole pass takes
    between FLOPs / peak and FLOPs / peak + bytes / bandwidth."""
    cfg, fp32 = load_bundled("gpt2-xl"), 66_900_000_000_000
    r = roofline(cfg, RunSpec("prefill", 16384, 1), H100)
    counted = count_flops(cfg, RunSpec("prefill", 16384, 1, causal=True)).total
    assert r.bound == "compute"
    for key in ("attention/q", "attention/scores", "attention/values", "mlp/up", "mlp/down"):
        assert r.components[key].time_s == counted.matmul[key] / fp32
    assert counted.total / fp32 < r.time_s < counted.total / fp32 + r.bytes / BW
    # the memory-bound components (the head's logits, norms, activations, residual adds) add 2.2% to it
    assert r.time_s == pytest.approx(counted.total / fp32, rel=0.03)


H100_AS_USER_YAML = """
name: my-h100
description: the H100 SXM written in other units
memory: "80000000000B"
memory_bandwidth: "3350GB/s"
peak_flops:
  fp32: "66900GFLOP/s"
  bf16: 989400000000000
source: "datasheet"
"""


def test_a_user_yaml_without_a_description_is_named_by_its_name(tmp_path, run):
    path = tmp_path / "gpu.yaml"
    path.write_text(H100_AS_USER_YAML.replace("description: the H100 SXM written in other units\n", ""))
    out = run("time", "gpt2-small", "--hardware", path).stdout
    assert "max(FLOPs / peak, bytes / bandwidth) on my-h100: 989.40 TFLOP/s bf16 dense" in out


def test_a_user_yaml_gives_the_same_closed_forms(tmp_path, run):
    path = tmp_path / "gpu.yaml"
    path.write_text(H100_AS_USER_YAML)
    for model, mode in (("mistral-7b", "decode"), ("gpt2-xl", "prefill")):
        bundled = json.loads(run("time", model, "--hardware", "h100", "--mode", mode, "--seq", "4096", "--json").stdout)
        mine = json.loads(run("time", model, "--hardware", path, "--mode", mode, "--seq", "4096", "--json").stdout)
        assert mine["hardware"] == "my-h100"
        assert (mine["time_s"], mine["bound"], mine["bytes"]) == (bundled["time_s"], bundled["bound"], bundled["bytes"])


def test_a_calibration_from_a_bundled_accelerator_is_its_own(tmp_path, run):
    """``from: h100`` in a file with the H100's figures gives the bundled h100's expected time (its
    fractions, read from h100.yaml); h200.yaml and a100-40gb.yaml take their chip's this way, and
    h100-96gb-500w.yaml the h100's with its own GEMM and flash attention fractions."""
    path = tmp_path / "mine.yaml"
    path.write_text(H100_AS_USER_YAML + "calibration:\n  from: h100\n")
    bundled = json.loads(run("time", "mistral-7b", "--hardware", "h100", "--mode", "decode", "--json").stdout)
    mine = json.loads(run("time", "mistral-7b", "--hardware", path, "--mode", "decode", "--json").stdout)
    assert mine["expected"]["time_s"] == bundled["expected"]["time_s"] > bundled["time_s"]
    assert mine["expected"]["calibration"].startswith("h100's: ")
    for card, chip in (("h200", "h100"), ("a100-40gb", "a100-80gb")):
        named, own = load_hardware(card).calibration, load_hardware(chip).calibration
        assert named._replace(source="") == own._replace(source="")
    capped = load_hardware("h100-96gb-500w").calibration
    assert (capped.gemm, capped.flash) == (0.50, 0.22)
    assert capped._replace(gemm=CAL.gemm, flash=CAL.flash, source="") == CAL._replace(source="")
    # one streaming kind changed, the other four h100's
    path.write_text(H100_AS_USER_YAML + "calibration:\n  from: h100\n  streaming: {int8: 0.25}\n")
    assert load_hardware(str(path)).calibration.streaming == {**CAL.streaming, "int8": 0.25} != CAL.streaming


def test_mla_decode_bytes_are_the_absorbed_closed_forms():
    """A decode step of a small MLA model (d 32, 4 heads, 2 layers, low-rank query 16, latent 12, nope 8, rope 4,
    values 6, SwiGLU of 40, 61 tokens, bf16) under flash, absorbed: kv_b's weights read once and each head's
    query (nope in, r out) and output (r in, v out) of the two absorbed matmuls; the kernel reads the absorbed
    query (h x (r + rope)) and each cached latent with its rope key once, that read shared by the scores and
    the values as their FLOPs are (r + rope : r, to the byte), and writes the latent output (h x r); the new
    token's latent and rope key written to the cache."""
    B, S, L, d, h, qr, r, nope, rope, v, f, V, b = 3, 20, 2, 32, 4, 16, 12, 8, 4, 6, 40, 61, 2
    raw = dict(name="mla", vocab_size=V, context_length=64, d_model=d, n_layers=L, n_heads=h, d_ff=f,
               attention="mla", position="rope", norm="rmsnorm", activation="swiglu",
               mla={"q_lora_rank": qr, "kv_lora_rank": r, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
                    "v_head_dim": v})
    cfg = from_dict(raw)
    linear = lambda d_in, d_out: L * (d_in * d_out + B * (d_in + d_out)) * b  # noqa: E731
    latent = (r + rope) * b  # a key's read
    to_scores = latent * (r + rope) // (2 * r + rope)  # 18 of its 32 bytes
    assert pass_bytes(cfg, RunSpec("decode", S, B)) == {
        "attention/q_a": linear(d, qr), "attention/q_b": linear(qr, h * (nope + rope)),
        "attention/kv_a": linear(d, r + rope), "attention/o": linear(h * v, d),
        "attention/kv_b": L * (r * h * (nope + v) + B * h * (nope + 2 * r + v)) * b,
        "attention/scores": L * B * (h * (r + rope) * b + S * to_scores),
        "attention/values": L * B * (h * r * b + S * (latent - to_scores)),
        "mlp/up": linear(d, f), "mlp/gate": linear(d, f), "mlp/down": linear(f, d),
        "norm": (L * (qr + r + 2 * d) + d) * B * 2 * b,  # q_a_norm, kv_a_norm, two a layer, the final: read, write
        "attention/rope": L * B * (h + 1) * rope * 2 * b, "activation": L * B * f * 3 * b,
        "residual": L * 2 * B * d * 3 * b, "kv_cache": L * B * (r + rope) * b,
        "embedding": 2 * B * d * b, "lm_head": d * V * b + B * (d + V) * b}
    # eager decompresses: kv_b over every key, the scores and values read each head's K and V
    eager = pass_bytes(cfg, RunSpec("decode", S, B, attention="eager"))
    assert eager["attention/kv_b"] == L * (r * h * (nope + v) + B * S * (r + h * (nope + v))) * b
    # DSA (top 5 of the 20 keys): the sparse absorbed kernel reads the 5 selected latents, not all 20
    sparse = pass_bytes(from_dict({**raw, "dsa": {"n_heads": 2, "head_dim": 6, "topk": 5}}), RunSpec("decode", S, B))
    assert (sparse["attention/scores"], sparse["attention/values"]) == (
        L * B * (h * (r + rope) * b + 5 * to_scores), L * B * (h * r * b + 5 * (latent - to_scores)))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 300), st.integers(1, 300), st.one_of(st.none(), st.integers(1, 300)),
       st.one_of(st.none(), st.integers(1, 50)))
def test_attended_span_is_the_union_of_the_queries_keys(past, n, window, chunk):
    """Each K/V row flash attention reads from HBM once: the keys some query attends to."""
    keys = set()
    for i in range(past, past + n):
        start = chunk * (i // chunk) if chunk is not None else 0 if window is None else max(0, i - window + 1)
        keys.update(range(start, i + 1))
    assert attended_span(past, n, None if chunk else window, chunk) == len(keys)


def test_flash_reads_each_kv_head_once_in_decode_and_far_less_than_eager_in_prefill():
    cfg = load_bundled("llama-3-8b")  # 8 K/V heads of 128, 32 layers
    decode = pass_bytes(cfg, RunSpec("decode", 8192, 1))
    # K and V of 8,192 tokens, 2 bytes, read once; Q (32 heads) read and O written once
    assert decode["attention/scores"] + decode["attention/values"] == 32 * (8 * 128 * 2 * 2 * 8192 + 2 * 32 * 128 * 2)
    flash = pass_bytes(cfg, RunSpec("prefill", 8192, 1))
    eager = pass_bytes(cfg, RunSpec("prefill", 8192, 1, attention="eager"))
    attn = ("attention/scores", "attention/values", "attention/scale", "attention/softmax")
    assert sum(eager.get(k, 0) for k in attn) > 4 * sum(flash.get(k, 0) for k in attn)


def _decode_bytes(cfg, seq):
    return roofline(cfg, RunSpec("decode", seq, 8), H100).bytes


def test_gqa_and_sliding_windows_read_fewer_bytes_in_decode():
    mistral = load_bundled("mistral-7b")  # 8 K/V heads, a 4,096-token window
    mha = mistral.replace(n_kv_heads=32)
    full = mistral.replace(sliding_window=None)
    assert _decode_bytes(mistral, 4096) < _decode_bytes(mha, 4096)
    assert _decode_bytes(mistral, 32768) < _decode_bytes(full, 32768)
    assert _decode_bytes(mistral, 32768) == _decode_bytes(mistral, 4096)  # the rolling buffer: a plateau




def test_op_runs_again_and_moves_again_what_it_keeps_no_output_of():
    """--recompute op on Llama 3 8B (flash): backward runs k, o and gate again (the 2nd, 4th and 6th of q,
    k, v, o, up, gate, down) and every elementwise op of the layers: four forwards' FLOPs, bytes and
    kernels where training has three; the other linears, the attention kernel, the LM head, the
    embedding and the optimizer step as without recomputation."""
    cfg, hw = load_bundled("llama-3-8b"), load_hardware("h100")
    none, op = (roofline(cfg, RunSpec("train", 4096, 1, recompute=r), hw).components for r in ("none", "op"))
    assert set(none) == set(op)
    # the layers' two RMSNorms a layer (4 FLOPs, one read and one write an element) run again, not the final one
    T, L, d = 4096, 32, 4096
    assert op["norm"].elementwise_flops - none["norm"].elementwise_flops == 2 * L * T * d * 4
    assert op["norm"].bytes - none["norm"].bytes == 2 * L * T * d * 2 * 2
    again = ("attention/k", "attention/o", "mlp/gate", "attention/rope", "activation", "residual")
    for key, c in op.items():
        if key == "norm":
            continue
        b, f = none[key], (4 if key in again else 3)
        assert 3 * c.matmul_flops == f * b.matmul_flops and 3 * c.elementwise_flops == f * b.elementwise_flops, key
        assert 3 * c.bytes == f * b.bytes and c.latency_s == pytest.approx(f / 3 * b.latency_s, rel=1e-12), key
    assert sum(op[k].matmul_flops for k in again) > sum(none[k].matmul_flops for k in again)


def test_op_casts_every_fp8_matmuls_input_again():
    """With fp8 matmuls per-op checkpointing keeps no linear's output (aten._scaled_mm is off its list):
    every linear runs again in backward, its input and weight cast again (analysis/perf/float8.py)."""
    cfg = load_bundled("llama-3-8b")
    T, L, d, kv, f = 4096, 32, 4096, 1024, 14336
    linears = [(d, d), (d, kv), (d, kv), (d, d), (d, f), (d, f), (f, d)]  # q k v o gate up down
    x, w, g = (T * sum(i for i, _ in linears), sum(i * o for i, o in linears), T * sum(o for _, o in linears))
    r = roofline(cfg, RunSpec("train", T, 1, dtype="fp8", recompute="op"), H100)
    casts, none = r.components["float8/casts"], roofline(cfg, RunSpec("train", T, 1, dtype="fp8"), H100)
    assert (casts.elementwise_flops, casts.bytes) == (3 * L * (2 * (x + w) + g), L * (2 * (4 * x + 6 * w) + 4 * g))
    for key in ("attention/q", "attention/v", "mlp/up", "mlp/down"):  # kept in bf16, run again in fp8
        assert 3 * r.components[key].matmul_flops == 4 * none.components[key].matmul_flops


def test_mfu_of_a_hand_example():
    """Llama 2 7B: 6,738,415,616 parameters, 131,072,000 of them the token embedding. At 3,000
    tokens/s on one A100 (312 TFLOP/s bf16), 6N gives 3,000 * 6 * 6,607,343,616 / 312e12. The model FLOPs
    (PaLM's: no recomputation, not even flash attention's rerun of the scores) are 6 x the matrices' weights
    (N less 2 x 32 + 1 norms of 4,096) plus 12 L d S of dense attention."""
    cfg = load_bundled("llama-2-7b")
    u = utilization(cfg, RunSpec("train", 4096, 1), load_hardware("a100-80gb"), 3000.0)
    assert u.of(u.six_n_per_token) == pytest.approx(3000 * 6 * 6_607_343_616 / 312e12, rel=1e-12)
    assert u.model_flops_per_token == 6 * (6_607_343_616 - 65 * 4096) + 12 * 32 * 4096 * 4096
    assert u.mfu > u.of(u.six_n_per_token)  # attention's FLOPs on top
    assert u.hfu < u.mfu  # flash skips the masked half of the scores


def test_a_global_batch_on_one_gpu_accumulates_before_one_optimizer_step(run):
    """--global-batch 64 on one GPU: 64 micro-batches, each a pass without the optimizer, then one optimizer step
    (it was each pass with its own optimizer step, the flag ignored)."""
    args = ["time", "llama-3-8b", "--hardware", "h100", "--seq", "4096", "--json"]
    one, step = (json.loads(run(*args, *extra).stdout) for extra in ([], ["--global-batch", "64"]))
    optimizer = one["components"]["optimizer"]
    for ideal, key in ((True, "time_s"), (False, "expected_s")):
        pass_s, opt_s = (one if ideal else one["expected"])["time_s"], optimizer[key]
        got = (step if ideal else step["expected"])["time_s"]
        assert got == pytest.approx(64 * (pass_s - opt_s) + opt_s, rel=1e-12)
    assert step["tokens"] == 64 * 4096


def test_generate_adds_decode_steps_to_the_prefill_and_caching_pays():
    cfg = load_bundled("llama-3-8b")
    g = generate(cfg, RunSpec("prefill", 1000, 4), H100, 1000, 100)
    assert g.ttft_s(False) == prefill(cfg, RunSpec("prefill", 1000, 4), H100).time_s
    steps = [roofline(cfg, RunSpec("decode", 1000 + k, 4), H100).time_s for k in (1, 99)]
    assert 99 * min(steps) <= g.decode_s <= 99 * max(steps)
    assert g.tokens_per_s(4, False) == pytest.approx(400 / (g.ttft_s(False) + g.decode_s))
    assert g.no_cache_total_s(False) > 3 * g.total_s(False)


# The pass-by-pass loops generate and prefill sum in closed form (analysis/perf/steps.py), kept here
# as their reference. Integers must be equal; seconds are sums of up to 10^3 floats in another order
# (the closed form sums exact integers and divides once), so they agree to ~1e-13: rel_tol 1e-9.
def loop_prefill(cfg, run, hw=H100):
    """Each chunk's own pass, in order."""
    run = run.resolve(cfg)
    size = run.chunk or run.seq
    return [roofline(cfg, run.replace(seq=min(p + size, run.seq), past=p, logits=p + size >= run.seq, chunk=None), hw)
            for p in range(0, run.seq, size)]


def loop_generate(cfg, run, prompt, new, hw=H100):
    """The decode steps' and the no-cache passes' times summed one by one: ideal, then expected."""
    sums = [0.0] * 4
    for k in range(1, new):
        for i, mode in enumerate(("decode", "prefill")):
            r = roofline(cfg, run.replace(mode=mode, seq=prompt + k, chunk=None), hw)
            sums[i] += r.time_s
            sums[2 + i] += r.expected_s
    return sums


# The expected sums take each piece of steps (between two breakpoints, and for no-cache passes each doubling of
# the context) at its middle step's calibrated rates, a piece of at most 4 steps step by step
# (analysis/perf/steps.time_sum): measured at worst 0.11% from the step-by-step sum on the bundled models
# (GPT-2 small's no-cache passes from 1 to 300 tokens), 0.20% on 300 random configs on an H100, 0.86% on an A100
EXPECTED_SUM_REL = 1e-2


def same_prefill(fast, passes):
    """A prefill's components are its passes' summed: the counts, each roof's seconds, and the time,
    each pass's own max (a chunk that is memory-bound among compute-bound ones adds its memory time)."""
    assert list(fast.components) == list(dict.fromkeys(k for r in passes for k in r.components))
    for key, c in fast.components.items():
        parts = [r.components[key] for r in passes if key in r.components]
        assert (c.matmul_flops, c.elementwise_flops, c.bytes) == tuple(
            sum(getattr(d, f) for d in parts) for f in ("matmul_flops", "elementwise_flops", "bytes")), key
        for roof in ("compute_s", "memory_s", "time_s"):
            assert getattr(c, roof) == pytest.approx(sum(getattr(d, roof) for d in parts), rel=1e-9), (key, roof)


def same_generation(cfg, run, prompt, new, hw=H100):
    g = generate(cfg, run, hw, prompt, new)
    same_prefill(g.first, loop_prefill(cfg, run.replace(seq=prompt), hw))
    decode, no_cache, expected_decode, expected_no_cache = loop_generate(cfg, run, prompt, new, hw)
    assert g.decode_s == pytest.approx(decode, rel=1e-9, abs=0)
    assert g.no_cache_s == pytest.approx(no_cache, rel=1e-9, abs=0)
    assert g.expected_decode_s == pytest.approx(expected_decode, rel=EXPECTED_SUM_REL, abs=0)
    assert g.expected_no_cache_s == pytest.approx(expected_no_cache, rel=EXPECTED_SUM_REL, abs=0)


@pytest.mark.parametrize("name, prompt, new, seq, chunk", [
    ("mistral-7b", 4000, 200, 9000, 1000),  # the 4,096 window inside both ranges
    ("gemma-2-9b", 4050, 100, 5000, 333),  # local and global layers, an odd chunk
    ("llama-4-scout", 8150, 100, 17000, 1000),  # chunked layers: 8,192-token chunks crossed
    ("mixtral-8x7b", 1, 60, 3000, 7),  # MoE: every expert read from the fourth token on
    ("deepseek-v3", 3, 40, 2000, 129),  # MLA and MoE
    ("deepseek-v3", 3, 4, 7, 1),  # one-token chunks: decompressed on the first, absorbed on the rest
    ("glm-5", 2000, 60, 4100, 999),  # DSA: each query's keys capped at its top-k (2,048) in both ranges
    ("gpt2-small", 1, 300, 1000, 100),  # learned positions
    ("qwen3-next-80b-a3b", 100, 40, 3000, 333),  # Gated DeltaNet: the no-cache passes cross a 64-token chunk
    ("granite-4.0-h-tiny", 230, 40, 2000, 300),  # Mamba-2: they cross its 256-token chunk
])
def test_generate_and_chunked_prefill_equal_the_pass_by_pass_loop(name, prompt, new, seq, chunk):
    cfg = load_bundled(name)
    same_generation(cfg, RunSpec("prefill", prompt, 2), prompt, new)
    same_generation(cfg, RunSpec("prefill", prompt, 1, attention="eager"), prompt, new // 4)
    same_prefill(prefill(cfg, RunSpec("prefill", seq, 3, chunk=chunk), H100),
                 loop_prefill(cfg, RunSpec("prefill", seq, 3, chunk=chunk)))


def test_roofs_nearly_equal_far_from_the_first_blocks_are_told_apart_exactly():
    """Compute less memory time (x - X)^2 + 3 r^2 - R (r = x mod 2), near 0 on blocks thousands past the three the
    block sums are read from, where a float's rounding of the difference's coefficients outgrows it (the review's
    case: the wrong roof by 6.7e-11 of the sum): its sign is then decided in fractions."""
    from fractions import Fraction

    from llmcalc.analysis.perf.blocks import Repeat
    from llmcalc.analysis.perf.steps import splits, time_sum

    lo, hi, X, R = 1_000_000, 1_027_727, 1_020_244, 909_759

    def f(x: int) -> dict[str, tuple[int, int, int]]:
        r = x % 2
        mm, ew = 815_708 * x * x + 912 * x * r + 34 * r * r + x % 2, 7 * x + r
        return {"k": (mm, ew, mm + ew + (x - X) ** 2 - 3 * r * r - R)}

    exact = sum(max(m + e, n) for x in range(lo, hi + 1) for m, e, n in f(x).values())
    got = time_sum(f, lambda x: lambda key: (1.0, 1.0, 1.0), lo, hi, set(), 2, Repeat(2, frozenset(splits([0]))))
    assert abs(Fraction(got) - exact) <= exact * Fraction(1, 10**14)


def test_whole_chunks_summed_as_blocks_equal_the_pass_by_pass_loop():
    """Llama 4 Scout with chunks of 8 positions: a generation's steps and a chunked prefill's chunks span many
    whole chunks, summed as blocks (analysis/perf/blocks.py)."""
    cfg = load_bundled("llama-4-scout").replace(attention_chunk=8)
    same_generation(cfg, RunSpec("prefill", 5, 2), 5, 200)
    same_prefill(prefill(cfg, RunSpec("prefill", 200, 3, chunk=4), H100),
                 loop_prefill(cfg, RunSpec("prefill", 200, 3, chunk=4)))


@settings(max_examples=25, deadline=None)
@given(valid_configs(), st.integers(1, 150), st.integers(1, 40), st.integers(1, 3), st.sampled_from(["flash", "eager"]),
       st.integers(1, 30))
def test_closed_forms_equal_the_loop_on_random_configs(raw, prompt, new, batch, attention, chunk):
    """Windows and chunks of a few tokens: every breakpoint kind (25 attention models a run, each a loop over
    every pass: the slowest property of this file)."""
    cfg = from_dict(raw, "<test>")
    run = RunSpec("prefill", prompt, batch, attention, chunk=chunk)
    slow = loop_prefill(cfg, run)
    same_prefill(prefill(cfg, run, H100), slow)
    same_generation(cfg, run, prompt, new)


# 1, x, r, x^2, x r, r^2: r = x - C (x // C), the keys a pass attends to in its chunk; and (x // C) r^2, of degree 3
# in (block, pass) together, which no pass's counts have: summed block by block
MONOMIALS = 7


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9), st.sampled_from([1, 2, 4]), st.integers(0, 40), st.integers(0, 400),
       st.sets(st.integers(0, 440), max_size=3),
       st.lists(st.lists(st.integers(0, 4), min_size=MONOMIALS, max_size=MONOMIALS), min_size=6, max_size=6),
       st.tuples(*[st.sampled_from([1.0, 3.0, 7.0, 50.0])] * 3), st.sets(st.integers(-12, 12), max_size=3))
# compute less memory time (x - 200)^2 + (r - 4)^2 - 5: positive on the edges of the blocks' rectangle, negative
# only near its middle (x 200, r 4)
@example(9, 1, 0, 400, set(), [[40011, 0, 0, 1, 0, 1, 0], [0] * 7, [0, 400, 8, 0, 0, 0, 0], *[[0] * 7] * 3],
         (1.0, 1.0, 1.0), set())
# (x - 200)^2 + r^2 - 3: negative only on the edge of a chunk's first interior position (r 1), near x 200
@example(9, 1, 0, 400, set(), [[39997, 0, 0, 1, 0, 1, 0], [0] * 7, [0, 400, 0, 0, 0, 0, 0], *[[0] * 7] * 3],
         (1.0, 1.0, 1.0), set())
def test_sums_over_repeating_chunks_equal_the_pass_by_pass_sums(every, step, lo, span, starts, coefficients, rates,
                                                               offsets):
    """A pass's counts of degree 2 in its position x and its chunk's index x // C together (a chunked layer's keys
    beside a full layer's), polynomial on each residue class modulo ``step``: count_sum and time_sum, which sum
    runs of whole chunks in closed form, equal the sums pass by pass, the roofs crossing inside the chunks or
    not (two components); the chunks' breakpoints with more ``offsets`` in each period (a chunked prefill's)."""
    from llmcalc.analysis.perf.blocks import Repeat
    from llmcalc.analysis.perf.steps import count_sum, splits, time_sum

    def f(x: int) -> dict[str, tuple[int, int, int]]:
        r = x - every * (x // every)
        terms = (1, x, r, x * x, x * r, r * r, x // every * r * r)
        counts = [sum(c * m for c, m in zip(row, terms)) + x % step for row in coefficients]
        return {"a": tuple(counts[:3]), "b": tuple(counts[3:])}

    hi = lo + span
    repeat = Repeat(every, frozenset(splits([0]) | offsets))
    passes = [f(x) for x in range(lo, hi + 1)]
    assert count_sum(f, lo, hi, starts, step, repeat) == {
        key: tuple(sum(p[key][i] for p in passes) for i in range(3)) for key in ("a", "b")}
    P, V, B = rates
    expected = sum(max(m / P + e / V, n / B) for p in passes for m, e, n in p.values())
    assert time_sum(f, lambda x: lambda key: rates, lo, hi, starts, step, repeat) == pytest.approx(expected, rel=1e-9)


def test_time_generate_prints_ttft_tpot_and_the_no_cache_comparison(run):
    result = run("time", "llama-3-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "1000", "--new", "100")
    assert result.exit_code == 0, result.stderr
    for words in ("time to first token", "time per output token", "tokens/s", "without a KV cache"):
        assert words in result.stdout
    data = json.loads(run("time", "llama-3-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "1000",
                          "--new", "100", "--json").stdout)
    assert {"ttft_s", "tpot_s", "tokens_per_s", "total_s", "no_cache_total_s"} <= set(data)
    assert data["time_s"] == data["total_s"] > data["ttft_s"]


@pytest.mark.parametrize("args, message", [
    (["--hardware", "h1000"], "Error: unknown hardware 'h1000'; did you mean h100"),
    (["--hardware", "h100", "--mfu", "0"],
     "Error: Invalid value for '--compute-efficiency' / '--mfu': must be in (0, 1], got '0'"),
    (["--hardware", "h100", "--bandwidth-efficiency", "x"],
     "Error: Invalid value for '--bandwidth-efficiency': expects a fraction"),
    (["--hardware", "h100", "--mode", "generate"], "Error: --mode generate needs --prompt and --new"),
    (["--hardware", "h100", "--tokens-per-s", "-3"],
     "Error: Invalid value for '--tokens-per-s': must be a positive number"),
    (["--hardware", "h100", "--fp8-scaling", "rowwise"], "Error: --fp8-scaling rowwise scales fp8 matmuls, which this "
                                                         "run has none of (--dtype fp8, or an inference on fp8 weights "
                                                         "on a GPU with an fp8 peak)"),
    (["--hardware", "h100", "--tp", "2", "--async-tp"], "Error: --async-tp (asynchronous tensor parallelism) "),
])
def test_bad_time_options_exit_2_with_one_line(run, args, message):
    result = run("time", "gpt2-small", *args)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if not line.startswith("Warning: ")]
    assert len(errors) == 1 and errors[0].startswith(message), result.stderr


@pytest.mark.parametrize("line, message", [
    ('memory_bandwidth: "3350GB"', "5: key 'memory_bandwidth': expects a rate with its unit, such as 3.35TB/s, "
                                   "got '3350GB'"),
    ("memory: 8e10", "4: key 'memory': expects a number with its unit, such as 80GB, or a whole number of bytes "
                     "written without an exponent, got 80000000000.0"),  # a YAML float, where 80000000000 is read
])
def test_a_bad_hardware_yaml_names_file_key_and_line(run, tmp_path, line, message):
    path = tmp_path / "gpu.yaml"
    key = line.split(":")[0]
    text = "\n".join(line if row.startswith(key + ":") else row for row in H100_AS_USER_YAML.splitlines())
    path.write_text(text)
    result = run("time", "gpt2-small", "--hardware", path)
    assert (result.exit_code, result.stderr) == (2, f"Error: {path}:{message}\n")


def test_a_hardware_file_is_read_by_any_name_that_exists(run, tmp_path, monkeypatch):
    """`--hardware my-gpu` names a file in the working directory as a model's path would, suffix or not."""
    (tmp_path / "my-gpu").write_text(H100_AS_USER_YAML)
    monkeypatch.chdir(tmp_path)
    result = run("time", "gpt2-small", "--hardware", "my-gpu", "--json")
    assert (result.exit_code, json.loads(result.stdout)["hardware"]) == (0, "my-h100")


def test_a_hardware_yaml_missing_what_a_run_needs_names_the_file(run, tmp_path):
    """H100_AS_USER_YAML has no interconnect (a layout needs its links) and, without its fp32 line, no
    vector peak (the elementwise work runs at it): refused once a run needs them, naming file and key."""
    path = tmp_path / "gpu.yaml"
    path.write_text(H100_AS_USER_YAML)
    result = run("time", "gpt2-small", "--hardware", path, "--tp", "2")
    assert (result.exit_code, result.stderr) == (2, f"Error: {path}: key 'interconnect.intra_node': my-h100 gives no "
                                                    "intra-node bandwidth, needed for tp over 2 GPUs\n")
    path.write_text(H100_AS_USER_YAML.replace('  fp32: "66900GFLOP/s"\n', ""))
    result = run("time", "gpt2-small", "--hardware", path)
    assert (result.exit_code, result.stderr) == (2, f"Error: {path}:6: key 'peak_flops': my-h100 lists no fp32 peak "
                                                    "(it has bf16), which this run needs\n")


def test_hardware_lists_the_bundled_accelerators_with_sources(run):
    data = json.loads(run("hardware", "--json").stdout)
    names = {d["name"] for d in data}
    assert {"h100", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s", "l4", "a10g", "rtx-4090", "mi300x",
            "b200", "h100-96gb-500w"} <= names
    assert all(d["source"] and d["peak_flops"]["bf16"] and d["memory_bandwidth"] for d in data)
    calibrated = {d["name"] for d in data if d["calibration"]}
    assert {"h100", "h200", "a100-80gb", "a100-40gb", "h100-96gb-500w", "b200"} <= calibrated
    assert "mi300x" not in calibrated


# The expected (calibrated) model: analysis/perf/calibration.py, the H100's `calibration:` section.
CAL = H100.calibration


def test_calibration_forms_are_their_closed_forms():
    """gemm x m/(m + 64) x n/(n + 128) x k/(k + 128); flash x q/(q + 128) x d/(d + 16); streaming
    by format x b/(b + 10^6); alpha-beta: calls x 10 us + bytes / (450 GB/s x 0.8) within a node."""
    assert CAL.gemm_eff(64, 128, 128) == pytest.approx(0.80 / 8)
    assert CAL.gemm_eff(1, 4096, 4096) == pytest.approx(0.80 * (1 / 65) * (4096 / 4224) ** 2)
    assert CAL.flash_eff(128, 16) == pytest.approx(0.55 / 4)
    assert CAL.streaming_eff("bf16", 10**6) == pytest.approx(0.40)
    assert CAL.streaming_eff("awq-int4", 10**6) == CAL.streaming_eff("int4", 10**6) == pytest.approx(0.225)
    assert CAL.streaming_eff("nf4-dq", 3 * 10**6) == pytest.approx(0.30 * 3 / 4)
    from llmcalc.analysis.perf.calibration import Link, collective_s
    assert collective_s(CAL, 3, 360 * 10**9, Link(450 * 10**9, True)) == pytest.approx(3 * 10e-6 + 1.0)
    assert collective_s(CAL, 1, 45 * 10**9, Link(50 * 10**9, False)) == pytest.approx(25e-6 + 1.0)


@settings(max_examples=40, deadline=None)
@given(valid_configs(), st.sampled_from(["train", "prefill", "decode"]), st.integers(1, 300), st.integers(1, 3),
       st.sampled_from(["flash", "eager"]))
def test_expected_is_never_faster_than_the_ideal(raw, mode, seq, batch, attention):
    cfg = from_dict(raw, "<test>")
    r = roofline(cfg, RunSpec(mode, seq, batch, attention), H100)
    for c in r.components.values():
        assert c.expected_compute_s >= c.compute_s and c.expected_memory_s >= c.memory_s
    assert r.expected_s >= r.time_s


def test_a_16k_flash_prefill_of_mistral_is_compute_bound_expected_and_ideal():
    """K/V served from L2: HBM reads each K/V row once (the compulsory traffic), so attention at
    16k tokens is compute-bound in both models (issue 26)."""
    r = prefill(load_bundled("mistral-7b"), RunSpec("prefill", 16384, 1), H100)
    assert (r.expected_bound, r.bound) == ("compute", "compute")
    assert r.components["attention/scores"].expected_bound == "compute"


def test_generate_expected_is_the_prefill_and_decode_steps_at_calibrated_rates():
    cfg = load_bundled("llama-3-8b")
    g = generate(cfg, RunSpec("prefill", 1000, 4), H100, 1000, 100)
    assert g.ttft_s(True) == prefill(cfg, RunSpec("prefill", 1000, 4), H100).expected_s
    steps = [roofline(cfg, RunSpec("decode", 1000 + k, 4), H100).expected_s for k in (1, 99)]
    assert 99 * min(steps) * (1 - 1e-9) <= g.expected_decode_s <= 99 * max(steps) * (1 + 1e-9)


@pytest.mark.parametrize("section, key", [
    ("calibration: 3", "calibration"),
    ("calibration:\n  gemm: 1.5", "calibration.gemm"),
    ("calibration:\n  warp: 2", "calibration.warp"),
    ("calibration:\n  streaming: {float: 0.8}", "calibration.streaming"),
    ("calibration:\n  kernel_us: -1", "calibration.kernel_us"),
    ("calibration:\n  fp8_rowwise: 0", "calibration.fp8_rowwise"),
    ("calibration:\n  from: b300", "calibration.from"),  # no such bundled accelerator
    ("calibration:\n  from: h200", "calibration.from"),  # h200's is itself from h100's: no chains
    ("calibration:\n  from: h100\n  gemm: 2", "calibration.gemm"),
    ("calibration:\n  gemm_m0: 1.1e21", "calibration.gemm_m0"),  # sizes up to 10^21, as the peaks
])
def test_a_bad_calibration_exits_2_naming_the_key(run, tmp_path, section, key):
    path = tmp_path / "bad.yaml"
    path.write_text(H100_AS_USER_YAML + section + "\n")
    result = run("time", "gpt2-small", "--hardware", str(path))
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line]
    assert len(errors) == 1 and key in errors[0] and "bad.yaml" in errors[0], result.stderr


# A calibrated spec, each line numbered in its comment: an error names the offending key's own line.
NUMBERED_YAML = """\
name: numbered  # 1
memory: "80GB"  # 2
memory_bandwidth: "3.35TB/s"  # 3
peak_flops:  # 4
  fp32: "66.9TFLOP/s"  # 5
  bf16: "989.4TFLOP/s"  # 6
source: "datasheet"  # 7
calibration:  # 8
  gemm: 0.8  # 9
  gemm_m0: 64  # 10
  streaming:  # 11
    float: 0.8  # 12
    fp8: 0.7  # 13
    int8: 0.6  # 14
    int4: 0.5  # 15
    nf4: 0.4  # 16
  kernel_us: 4  # 17
"""
FROM_YAML = NUMBERED_YAML.split("calibration:")[0] + """\
calibration:  # 8
  from: h100  # 9
  source: "h100's, my links"  # 10
  flash: 0.5  # 11
  bus_inter: 0.9  # 12
"""


@pytest.mark.parametrize("text, old, new, line, key, message", [
    (NUMBERED_YAML, "kernel_us: 4", "kernel_us: -1", 17, "calibration.kernel_us",
     "expected a number from 0 to 10^21, got -1"),
    (NUMBERED_YAML, "gemm_m0: 64", "gemm_m0: many", 10, "calibration.gemm_m0",
     "expected a number from 0 to 10^21, got 'many'"),
    (NUMBERED_YAML, "kernel_us: 4", "kernel_ms: 4", 17, "calibration.kernel_ms",
     "unknown key (known: bus_inter, bus_intra, elementwise, flash, flash_d0, flash_q0, fp8_rowwise, gemm, gemm_m0, "
     "gemm_n0, kernel_us, latency_inter_us, latency_intra_us, overlap, source, streaming, streaming_b0)"),
    (NUMBERED_YAML, "int8: 0.6", "int8: 2", 14, "calibration.streaming.int8", "expected a fraction in (0, 1], got 2"),
    (NUMBERED_YAML, "    int4: 0.5  # 15\n", "", 11, "calibration.streaming",
     "expected a fraction for each of float, fp8, int8, int4, nf4: int4 missing"),
    (NUMBERED_YAML, "    int4: 0.5  # 15", "    int3: 0.5  # 15", 15, "calibration.streaming.int3",
     "unknown kind (known: float, fp8, int8, int4, nf4)"),
    (NUMBERED_YAML, '  fp32: "66.9TFLOP/s"  # 5', '  fp4: "66.9TFLOP/s"  # 5', 5, "peak_flops.fp4",
     "unknown dtype (known: fp32, tf32, bf16, fp16, fp8, int8)"),
    (NUMBERED_YAML, 'source: "datasheet"  # 7', 'interconnect: {nvlink: "900GB/s"}  # 7', 7, "interconnect.nvlink",
     "unknown key (known: intra_node, inter_node, gpus_per_node)"),
    (NUMBERED_YAML, 'bf16: "989.4TFLOP/s"', "bf16: -3", 6, "peak_flops.bf16",
     "expected a positive whole number of base units up to 10^21, got -3"),
    (FROM_YAML, "bus_inter: 0.9", "bus_inter: 1.5", 12, "calibration.bus_inter",
     "expected a fraction in (0, 1], got 1.5"),
    (FROM_YAML, "from: h100", "from: h200", 9, "calibration.from",  # h200's is itself from h100's: no chains
     "h200 has no calibration of its own to start from"),
    (FROM_YAML, "flash: 0.5", "streaming: {int9: 0.5}", 11, "calibration.streaming.int9",
     "unknown kind (known: float, fp8, int8, int4, nf4)"),
    (FROM_YAML, "flash: 0.5", "streaming: {}", 11, "calibration.streaming",
     "expected a fraction for some of float, fp8, int8, int4, nf4"),
], ids=["kernel_us", "gemm_m0", "unknown", "streaming.int8", "streaming", "streaming.int3", "peak_flops.fp4",
        "interconnect.nvlink", "peak_flops.bf16", "from-bus_inter", "from", "from-streaming", "from-streaming-empty"])
def test_a_bad_calibration_names_the_keys_own_line(run, tmp_path, text, old, new, line, key, message):
    assert old in text
    path = tmp_path / "numbered.yaml"
    path.write_text(text.replace(old, new))
    result = run("time", "gpt2-small", "--hardware", str(path))
    assert result.exit_code == 2
    assert result.stderr == f"Error: {path}:{line}: key '{key}': {message}\n"


def test_the_numbered_specs_are_valid(run, tmp_path):
    """The specs the test above breaks one key of are read as they are."""
    for name, text in (("numbered.yaml", NUMBERED_YAML), ("from.yaml", FROM_YAML)):
        path = tmp_path / name
        path.write_text(text)
        assert run("time", "gpt2-small", "--hardware", str(path)).exit_code == 0


def test_calibration_sizes_reach_the_bound_the_peaks_have(run, tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(H100_AS_USER_YAML + "calibration:\n  from: h100\n  gemm_m0: 1e21\n")
    assert run("time", "gpt2-small", "--hardware", str(path)).exit_code == 0


FP8, FP32 = 1_978_900_000_000_000, 66_900_000_000_000  # the H100 SXM datasheet: 1,978.9 TFLOP/s fp8, 66.9 fp32


def test_fp8_runs_the_layers_matmuls_at_the_fp8_peak_and_adds_their_casts():
    """--dtype fp8: the layers' linears at the fp8 peak, the LM head, attention and elementwise ops as in
    bf16, and torchao's casts (analysis/perf/float8.py) as a component of their own, in closed form."""
    cfg = load_bundled("llama-3-8b")  # 32 layers, d 4,096, 8 KV heads of 128, d_ff 14,336
    bf16 = roofline(cfg, RunSpec("train", 4096, 1), H100)
    fp8 = roofline(cfg, RunSpec("train", 4096, 1, dtype="fp8"), H100)
    assert (fp8.run.dtype, fp8.run.matmul_dtype, fp8.run.weights_dtype) == ("bf16", "fp8", "bf16")
    for key in ("attention/q", "attention/k", "attention/o", "mlp/gate", "mlp/down"):
        c, b = fp8.components[key], bf16.components[key]
        assert (c.matmul_flops, c.elementwise_flops, c.bytes) == (b.matmul_flops, b.elementwise_flops, b.bytes)
        assert c.compute_s == c.matmul_flops / FP8 + c.elementwise_flops / FP32
    for key in ("lm_head", "attention/scores", "attention/values", "norm", "optimizer"):
        assert fp8.components[key] == bf16.components[key], key
    T, L, d, kv, f = 4096, 32, 4096, 1024, 14336
    linears = [(d, d), (d, kv), (d, kv), (d, d), (d, f), (d, f), (f, d)]  # q k v o gate up down
    x, w, g = (T * sum(i for i, _ in linears), sum(i * o for i, o in linears), T * sum(o for _, o in linears))
    # input and output gradient: read in bf16, written twice in fp8; weight: read twice, written twice
    casts = fp8.components["float8/casts"]
    assert (casts.matmul_flops, casts.elementwise_flops) == (0, 3 * L * (x + w + g))
    assert casts.bytes == L * (4 * x + 6 * w + 4 * g)
    assert casts.time_s == max(casts.elementwise_flops / FP32, casts.bytes / BW)
    assert fp8.time_s < bf16.time_s


def test_fp8_inference_casts_once_and_fp8_weights_are_not_cast():
    """Inference casts each input once however many linears read it (q, k, v: one qkv_proj in vLLM; gate and
    up: one gate_up_proj), read in bf16 and written in fp8; bf16 weights read twice and written once."""
    cfg = load_bundled("llama-3-8b")
    T, L, d, kv, f = 512, 32, 4096, 1024, 14336
    linears = [(d, d), (d, kv), (d, kv), (d, d), (d, f), (d, f), (f, d)]
    x, w = T * (d + d + d + f), sum(i * o for i, o in linears)  # qkv's input, o's, gate/up's, down's
    bf16_weights = roofline(cfg, RunSpec("prefill", T, 1, dtype="fp8"), H100).components["float8/casts"]
    assert bf16_weights.bytes == L * (3 * x + 5 * w)  # one layout written
    fp8_weights = roofline(cfg, RunSpec("prefill", T, 1, dtype="fp8", weights_dtype="fp8"), H100)
    assert fp8_weights.components["float8/casts"].bytes == L * 3 * x


def test_fp8_inference_casts_a_moe_tokens_input_once_before_routing():
    """Qwen3-30B-A3B (48 layers, d 2,048, 32 heads and 4 KV heads of 128, 128 experts of 768, top 8) on fp8
    weights: each token's attention input (q, k, v), o's input, the experts' input before routing (gate and
    up of its 8 experts, vLLM's w13), then each of its 8 expert slots' activation (down's input)."""
    cfg = load_bundled("qwen3-30b-a3b")
    T, L, d, f = 1024, 48, 2048, 768
    x = T * (d + 32 * 128 + d + 8 * f)
    casts = roofline(cfg, RunSpec("prefill", T, 1, dtype="fp8", weights_dtype="fp8-block"), H100)
    assert casts.components["float8/casts"].bytes == L * 3 * x


def test_fp8_rowwise_casts_each_axis_and_its_gemms_run_at_the_calibrated_fraction():
    """--fp8-scaling rowwise: torchao's roofline of the rowwise recipe (analysis/perf/float8.py): each
    input and output gradient written in fp8 and as a transposed bf16 copy, read and written in fp8
    again (6 bytes a value), each weight read, cast, transposed and cast again (4 x 2 + 2 bytes), every
    value cast along both axes; the fp8 GEMMs at the h100's fp8_rowwise (0.70) of the tensorwise rate."""
    cfg = load_bundled("llama-3-8b")
    T, L, d, kv, f = 4096, 32, 4096, 1024, 14336
    linears = [(d, d), (d, kv), (d, kv), (d, d), (d, f), (d, f), (f, d)]  # q k v o gate up down
    x, w, g = (T * sum(i for i, _ in linears), sum(i * o for i, o in linears), T * sum(o for _, o in linears))
    tensorwise = roofline(cfg, RunSpec("train", T, 1, dtype="fp8"), H100)
    rowwise = roofline(cfg, RunSpec("train", T, 1, dtype="fp8", fp8_scaling="rowwise"), H100)
    assert (tensorwise.run.fp8_scaling, rowwise.run.fp8_scaling) == ("tensorwise", "rowwise")
    casts = rowwise.components["float8/casts"]
    assert (casts.elementwise_flops, casts.bytes) == (3 * 2 * L * (x + w + g), L * (6 * x + 10 * w + 6 * g))
    assert CAL.fp8_rowwise == 0.7
    for key in ("attention/q", "mlp/down"):
        r, t = rowwise.components[key], tensorwise.components[key]
        assert (r.compute_s, r.matmul_flops) == (t.compute_s, t.matmul_flops)  # the ideal: the fp8 peak
        assert r.expected_compute_s == pytest.approx(t.expected_compute_s / 0.7, rel=1e-12)
    for key in ("lm_head", "attention/scores", "norm"):  # bf16 work: no rowwise GEMM
        assert rowwise.components[key] == tensorwise.components[key]
    inference = roofline(cfg, RunSpec("prefill", 512, 1, dtype="fp8", fp8_scaling="rowwise"), H100)
    x = 512 * (d + d + d + f)  # each input once: qkv's, o's, gate/up's, down's
    assert inference.components["float8/casts"].bytes == L * (3 * x + 3 * w)  # read, written in fp8, once


def test_fp8_memory_is_the_bf16_runs():
    """torchao saves the bf16 input and weight for backward; the fp8 copies live for one matmul."""
    from llmcalc.analysis.cluster.memory import memory

    cfg = load_bundled("llama-3-8b")
    for run in (RunSpec("train", 4096, 2, recompute="selective"),
                RunSpec("train", 4096, 2, layout=Layout(dp=8, zero=3))):
        fp8, bf16 = memory(cfg, run.replace(dtype="fp8")), memory(cfg, run)
        assert fp8._replace(run=bf16.run) == bf16 and fp8.run.matmul_dtype == "fp8"


def test_int4_embedding_rows_alternate_with_the_token_count():
    """int4 packs two values a byte: ceil(T d / 2) bytes of embedding rows, T d odd every other pass of
    a no-cache recompute; the closed form sums each parity apart."""
    cfg = from_dict({"name": "odd", "vocab_size": 130, "context_length": 256, "n_layers": 1, "d_model": 23,
                     "n_heads": 1, "d_ff": 5, "dtype": "int4"}, "<test>")
    same_generation(cfg, RunSpec("prefill", 85, 3), 85, 14)


def test_a_format_streams_only_the_matrices_it_quantizes():
    """MXFP4 quantizes routed experts alone: GPT-OSS's attention under it streams at bf16's expected rates,
    its experts fewer bytes. bitsandbytes cannot reach Mixtral's stacked experts: under NF4 they
    stream as bf16 does, while its attention matrices stream at NF4's rate (a kernel a layer)."""
    run = RunSpec("decode", 1024, 1)
    cfg = load_bundled("gpt-oss-20b")
    plain, mxfp4 = (roofline(cfg, run.replace(weights_dtype=w), H100).components for w in (None, "mxfp4"))
    assert mxfp4["attention/q"] == plain["attention/q"]
    assert mxfp4["moe/experts"].bytes < plain["moe/experts"].bytes
    cfg = load_bundled("mixtral-8x7b")
    plain, nf4 = (roofline(cfg, run.replace(weights_dtype=w), H100).components for w in (None, "nf4"))
    assert nf4["moe/experts"].expected_memory_s == plain["moe/experts"].expected_memory_s
    q = nf4["attention/q"]
    assert q.bytes < plain["attention/q"].bytes
    assert q.expected_memory_s == pytest.approx(q.bytes / (BW * CAL.streaming_eff("nf4", q.bytes / 32)), rel=1e-12)
    # QLoRA: the adapters beside the NF4 base are bf16, streamed as without a format
    from llmcalc.analysis.spec import LoRA
    cfg, run = load_bundled("llama-3-8b"), RunSpec("train", 2048, 1, lora=LoRA(16))
    plain, nf4 = (roofline(cfg, run.replace(weights_dtype=w), H100).components for w in (None, "nf4"))
    assert nf4["attention/q/lora"] == plain["attention/q/lora"]


def test_generate_warns_when_the_prompt_and_new_tokens_pass_the_context(run):
    """Llama 3 8B reads 8,192 tokens: a prompt of 8,000 fits, with 1,000 new tokens it does not."""
    args = ["time", "llama-3-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "8000", "--new"]
    assert run(*args, "192").stderr == ""
    assert run(*args, "1000").stderr == ("Warning: llama-3-8b: --prompt + --new 9,000 exceeds its context length "
                                         "(8,192); computing anyway\n")


def test_a_prefill_with_all_logits_times_the_head_at_every_position(run):
    """Scoring 8,192 tokens with Llama 3 8B: the LM head's matmul 2 x 8,192 x 4,096 x 128,256 FLOPs, not the last
    position's alone; a generation's prefill needs only the last (the option is ignored with a warning)."""
    args = ["time", "llama-3-8b", "--hardware", "h100", "--mode", "prefill", "--seq", "8192", "--json"]
    last, every = (json.loads(run(*args, *more).stdout) for more in ([], ["--all-logits"]))
    assert (last["components"]["lm_head"]["flops"], every["components"]["lm_head"]["flops"]) == (
        2 * 4096 * 128_256, 2 * 8192 * 4096 * 128_256)
    assert every["expected"]["time_s"] > last["expected"]["time_s"]
    generate = run("time", "llama-3-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "100", "--new", "10",
                   "--all-logits")
    assert generate.stderr == "Warning: --all-logits does not apply to --mode generate; ignored\n"


@pytest.mark.parametrize("layout", [[], ["--dp", "8", "--zero", "3"]])  # a roofline, and a step on a layout
def test_a_whole_run_at_the_measured_throughput_beside_the_expected(run, layout):
    """--tokens 1e9 on A100s (312 TFLOP/s bf16, datasheet): at a measured 3,000 tokens/s a GPU the run takes
    1e9 / (3,000 G) seconds and G times that in GPU-seconds, its MFU 3,000 x FLOPs a token / 312e12; the expected
    figures stay the calibrated model's, those of the same command without a measurement."""
    gpus = 8 if layout else 1
    args = ["time", "llama-3-8b", "--hardware", "a100-80gb", "--seq", "4096", *layout, "--tokens", "1e9", "--json"]
    plain = json.loads(run(*args).stdout)
    measured = json.loads(run(*args, "--tokens-per-s", str(3000 * gpus)).stdout)
    assert measured["expected"] == plain["expected"]
    assert plain["expected"]["run_time_s"] == pytest.approx(1e9 / plain["expected"]["tokens_per_s"])
    seconds = 1e9 / (3000 * gpus)
    assert measured["training_run"] == {"tokens": 1e9, "gpus": gpus, "time_s": pytest.approx(seconds),
                                        "gpu_hours": pytest.approx(seconds * gpus / 3600)}
    util = measured["utilization"]
    assert util["measured"] and util["mfu"] == pytest.approx(3000 * util["model_flops_per_token"] / 312e12)
    text = run(*args[:-1], "--tokens-per-s", str(3000 * gpus)).stdout.splitlines()[-1]
    assert text.startswith(f"1.00 G tokens on {gpus} GPU(s) at the measured throughput: ")


def test_mfu_above_100_percent_is_explained_and_a_throughput_above_the_ideal_warned(run):
    """Llama 3.1 8B at 32k tokens: MFU's model FLOPs count attention dense (PaLM), which flash attention
    runs half of, so the ideal's MFU passes 100%; a measured throughput above the ideal's is warned of."""
    args = ["time", "llama-3.1-8b", "--hardware", "h100", "--seq", "32768"]
    data = json.loads(run(*args, "--json").stdout)
    assert data["utilization"]["mfu"] > 1 > data["utilization"]["hfu"]
    assert run(*args).stdout.splitlines()[-1].startswith("MFU above 100%: the model FLOPs count attention dense")
    ideal = data["utilization"]["tokens_per_s"]
    full = run(*args).stderr  # its 32,768 tokens' training state and activations exceed an H100's memory
    assert full.startswith("Warning: llama-3.1-8b at --seq 32,768, batch 1: the GPU needs ")
    assert run(*args, "--tokens-per-s", str(int(ideal))).stderr == full
    assert run(*args, "--tokens-per-s", str(int(ideal) + 1)).stderr.startswith(
        f"{full}Warning: llama-3.1-8b: --tokens-per-s {int(ideal) + 1:,} is above the ideal's {ideal:,.0f} tokens/s")
    far = run(*args, "--tokens-per-s", "1e9")  # past what the executed FLOPs allow: the warning, not the note
    assert far.stderr.startswith(f"{full}Warning: llama-3.1-8b: --tokens-per-s 1,000,000,000 is above the ideal's")
    assert "MFU above 100%" not in far.stdout


def test_the_title_names_a_weights_format(run):
    args = ["time", "llama-3-8b", "--hardware", "h100", "--mode", "decode", "--seq", "1024"]
    assert run(*args, "--weights-dtype", "nf4").stdout.splitlines()[0] == \
        "llama-3-8b on h100: decode, seq 1,024, batch 1, bf16, nf4 weights, flash attention"
    assert run(*args).stdout.splitlines()[0] == "llama-3-8b on h100: decode, seq 1,024, batch 1, bf16, flash attention"


def test_generate_tables_and_csv_say_what_each_figure_is(run):
    """The side-by-side table's FLOPs and bytes are the prefill's, so headed; the CSV carries each
    generation's figures, the ideal's and the expected ones, as the JSON has them (one model or several)."""
    args = ["time", "llama-3-8b", "mistral-7b", "--hardware", "h100", "--mode", "generate", "--prompt", "100", "--new",
            "10"]
    assert "prefill FLOPs" in run(*args).stdout and "prefill bytes" in run(*args).stdout
    for models in (args[1:3], args[1:2]):
        cmd = [args[0], *models, *args[3:]]
        data = json.loads(run(*cmd, "--json").stdout)
        rows = list(csv.DictReader(io.StringIO(run(*cmd, "--format", "csv").stdout)))
        for rec in data if isinstance(data, list) else [data]:
            row = next(r for r in rows if r["model"] == rec["model"])
            for key in ("ttft_s", "tpot_s", "tokens_per_s", "total_s"):
                assert (float(row[key]), float(row[f"expected.{key}"])) == (rec[key], rec["expected"][key])


MAMBA2 = {"name": "m2", "vocab_size": 1000, "context_length": 4096, "d_model": 256, "n_layers": 2, "n_heads": 4,
          "d_ff": 0, "norm": "rmsnorm", "position": "none", "dtype": "bf16",
          "layer_types": ["mamba2"], "mamba2": {"d_state": 16, "d_conv": 4, "n_heads": 8, "head_dim": 64, "n_groups": 2,
                                                "conv_bias": True, "chunk_size": 32}}


def MAMBA2_DECODE_BYTES(B, L):  # noqa: N802 (a table of closed forms)
    """A decode step of ``L`` Mamba-2 layers (d 256, E = 8 heads x 64 = 512, N 16, G 2, K 4, no FFN, an untied
    head of 1,000 tokens) over ``B`` sequences, bf16 with an fp32 state: each linear its weights and rows; the
    core kernel (conv and scan) reads x, B, C (E + 2GN) and dt (H) and writes y (E) a token, reads its conv
    weights and biases and A_log, and reads and writes each sequence's state, the conv's last K inputs of x, B
    and C and the H x P x N SSM state; the ops outside it read and write as their Op says."""
    d, E, H, N, G, K, V, b, s = 256, 512, 8, 16, 2, 4, 1000, 2, 4
    conv = E + 2 * G * N
    linear = lambda d_in, d_out: L * (d_in * d_out + B * (d_in + d_out)) * b  # noqa: E731
    return {"mamba2/in_proj": linear(d, 2 * E + 2 * G * N + H), "mamba2/out_proj": linear(E, d),
            "mamba2/scan": L * (B * (conv + H + E) * b + (conv * K + conv + H) * b + 2 * B * (conv * K + E * N) * s),
            "mamba2/dt": L * B * H * 2 * b,  # + dt_bias, softplus: a read, a write
            "mamba2/output": L * B * E * 3 * b,  # y + x * D
            "mamba2/norm": L * B * E * 3 * b,  # the gated norm: y and z read, a write
            "norm": (L + 1) * B * d * 2 * b,  # the layers' and the final norm
            "residual": L * B * d * 3 * b,
            "embedding": 2 * B * d * b, "lm_head": d * V * b + B * (d + V) * b}


@pytest.mark.parametrize("B", [1, 3])
def test_a_mamba2_decode_step_moves_weights_rows_and_the_state_read_and_written(B):
    cfg = from_dict(MAMBA2, "<test>")
    assert pass_bytes(cfg, RunSpec("decode", 100, B, state_dtype="fp32")) == MAMBA2_DECODE_BYTES(B, 2)


def test_state_dtype_reaches_time_and_memory(run, config_file):
    """--state-dtype on `time` and `memory`: a decode step reads and writes each sequence's state in it,
    and the inference memory holds it, 2 layers x 3 sequences x (the conv's K inputs of E + 2GN channels
    and the H x P x N SSM state) of 4 bytes."""
    path = config_file(json.dumps(MAMBA2))
    args = ["--mode", "decode", "--seq", "100", "--batch", "3", "--state-dtype", "fp32", "--json"]
    data = json.loads(run("time", path, "--hardware", "h100", *args).stdout)
    scan = data["components"]["mamba2/scan"]["bytes"]
    assert (data["state_dtype"], scan) == ("fp32", MAMBA2_DECODE_BYTES(3, 2)["mamba2/scan"])
    args[1] = "inference"
    memory = json.loads(run("memory", path, *args).stdout)
    assert (memory["state_dtype"], memory["kv_cache"]) == ("fp32", 2 * 3 * ((512 + 2 * 2 * 16) * 4 + 512 * 16) * 4)


def test_a_mixer_beside_attention_adds_its_parts_and_one_residual_add():
    """Falcon-H1's layout: the Mamba-2 mixer beside each attention layer moves what a Mamba-2 layer does, and
    the layer adds its output to the residual stream once more; attention's bytes are unchanged."""
    raw = {**MAMBA2, "layer_types": ["full"], "n_kv_heads": 2, "d_ff": 64, "activation": "swiglu"}
    attention = {k: v for k, v in raw.items() if k != "mamba2"}
    run = RunSpec("decode", 100, 3, state_dtype="fp32")
    alone, beside = (pass_bytes(from_dict(r, "<test>"), run) for r in (attention, {**raw, "parallel_mixer": "mamba2"}))
    mixer = {k: v for k, v in MAMBA2_DECODE_BYTES(3, 2).items() if k.startswith("mamba2/")}
    assert beside == alone | mixer | {"residual": alone["residual"] + 2 * 3 * 256 * 3 * 2}


def test_a_gated_deltanet_prefill_moves_weights_rows_and_writes_the_state():
    """One Gated DeltaNet layer (d 128; 2 key heads of 32, 4 value heads of 16: C = 2*2*32 + 4*16 = 192 conv
    channels, K 4, chunks of 16) prefilling B 2 x 50 tokens in bf16: the core reads q, k, v (C), beta and the
    decay (Hv each) and writes the output (Hv*dv) a token, reads its conv weights, and writes each sequence's
    state (C*K + Hv*dk*dv, the cache); the head and the final norm run over the last token of each sequence."""
    raw = {**MAMBA2, "vocab_size": 500, "d_model": 128, "n_layers": 1, "layer_types": ["gated_deltanet"],
           "gated_deltanet": {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
                              "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "chunk_size": 16}}
    del raw["mamba2"]
    d, Hv, dk, dv, K, V, B, T, b = 128, 4, 32, 16, 4, 500, 2, 100, 2
    C = 2 * 2 * dk + Hv * dv
    linear = lambda d_in, d_out: (d_in * d_out + T * (d_in + d_out)) * b  # noqa: E731
    assert pass_bytes(from_dict(raw, "<test>"), RunSpec("prefill", 50, B)) == {
        "gated_deltanet/in_proj_qkv": linear(d, C), "gated_deltanet/in_proj_z": linear(d, Hv * dv),
        "gated_deltanet/in_proj_b": linear(d, Hv), "gated_deltanet/in_proj_a": linear(d, Hv),
        "gated_deltanet/out_proj": linear(Hv * dv, d),
        "gated_deltanet/scan": T * (C + 2 * Hv + Hv * dv) * b + C * K * b + B * (C * K + Hv * dk * dv) * b,
        "gated_deltanet/gates": (T * Hv + Hv) * 2 * b,  # beta and the decay; -exp(A_log) once
        "gated_deltanet/norm": T * Hv * dv * 3 * b,
        "norm": (T + B) * d * 2 * b, "residual": T * d * 3 * b,
        "embedding": 2 * T * d * b, "lm_head": d * V * b + B * (d + V) * b}


def test_time_runs_recurrent_models_and_refuses_their_tensor_parallel_layouts_in_one_line(run):
    ok = run("time", "qwen3-next-80b-a3b", "--hardware", "h100", "--mode", "decode", "--seq", "4096")
    assert ok.exit_code == 0, ok.stderr
    assert "gated_deltanet/scan" in ok.stdout
    refused = run("time", "qwen3-next-80b-a3b", "--hardware", "h100", "--mode", "decode", "--seq", "4096", "--tp", "2")
    assert (refused.exit_code, refused.stderr) == (2, "Error: --tp 2: qwen3-next-80b-a3b has gated_deltanet layers, "
                                                      "which are not split over tensor-parallel GPUs here\n")
    ring = run("time", "qwen3-next-80b-a3b", "--hardware", "h100", "--seq", "16384", "--cp", "2")
    assert (ring.exit_code, ring.stderr) == (2, "Error: --cp 2: qwen3-next-80b-a3b has gated_deltanet layers, which "
                                                "are not split over context-parallel GPUs here\n")


@pytest.mark.parametrize("mode, args", [
    ("train", ["--seq", "2048"]),
    ("train", ["--seq", "4096", "--tp", "2", "--pp", "2", "--dp", "2", "--global-batch", "8"]),
    ("prefill", ["--seq", "8192", "--batch", "4", "--attention", "eager"]),
])
def test_time_sizes_memory_as_memory_does(run, mode, args):
    """time's memory_bytes is `llmcalc memory`'s total for the same workload (a prefill: --mode inference)."""
    timed = json.loads(run("time", "mistral-7b", "--hardware", "h100", "--mode", mode, *args, "--json").stdout)
    sized = json.loads(run("memory", "mistral-7b", "--mode", "train" if mode == "train" else "inference", *args,
                           "--json").stdout)
    assert timed["memory_bytes"] == sized["total"]


@pytest.mark.parametrize("attention, expected", [
    # the prefill's 1,000 x 1,000 fp32 scores of each of 32 heads and 8 sequences dominate
    ("eager", 8 * 32 * 1000 * 1000 * 4 + 32 * 2 * 8 * 128 * 1000 * 8 * 2),
    # the last step's cache of 1,100 tokens (and its queries' fp32 softmax statistics)
    ("flash", 8 * 32 * 4 + 32 * 2 * 8 * 128 * 1100 * 8 * 2),
])
def test_a_generation_needs_the_larger_of_its_prefill_and_its_last_step(run, attention, expected):
    """Mistral 7B (7,241,732,096 parameters, 32 layers of 8 KV heads of 128), 8 sequences: bf16 weights, the
    attention and KV cache of the larger pass, the last position's logits (32,000 in bf16)."""
    data = json.loads(run("time", "mistral-7b", "--hardware", "h100", "--mode", "generate", "--prompt", "1000",
                          "--new", "100", "--batch", "8", "--attention", attention, "--json").stdout)
    assert data["memory_bytes"] == 2 * 7_241_732_096 + expected + 8 * 32_000 * 2


def test_time_warns_where_the_gpu_cannot_hold_the_run(run):
    from llmcalc.cli.format import iec

    args = ("deepseek-v3.2", "--seq", "32768", "--tp", "8", "--batch", "32")
    one = run("time", *args, "--hardware", "h100", "--mode", "prefill")
    need = json.loads(run("memory", *args, "--mode", "inference", "--json").stdout)["total"]
    assert one.exit_code == 0 and need > 80 * 10**9  # the h100's 80 GB
    assert one.stderr == (f"Warning: deepseek-v3.2 at --seq 32,768, batch 32: the peak GPU needs {iec(need)}, more "
                          "than the h100's 74.51 GiB (llmcalc memory gives the parts); timed as if it fit\n")
    rows = run("time", "mistral-7b", "llama-2-7b", "--hardware", "h100", "--mode", "decode", "--seq", "4096",
               "--batch", "1,64", "--json")
    needs = [r["memory_bytes"] for r in json.loads(rows.stdout)]
    assert [n > 80 * 10**9 for n in needs] == [False, False, False, True]  # the h100's 80 GB
    assert rows.stderr == ("Warning: 1 of 4 rows need more memory than the h100's 74.51 GiB (the memory column): "
                           "llama-2-7b; timed as if they fit\n")
    fits = run("time", "mistral-7b", "--hardware", "h100", "--mode", "decode", "--seq", "4096")
    assert (fits.exit_code, fits.stderr) == (0, "")


def _timed(run, *args):
    result = run("time", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("weights, scaling", [("fp8-block", "rowwise"), ("fp8-channel", "rowwise"),
                                              ("fp8-tensor", "tensorwise"), ("fp8", "tensorwise")])
def test_inference_on_fp8_weights_runs_fp8_matmuls_where_the_gpu_has_them(run, weights, scaling):
    """As vLLM and SGLang serve an fp8 checkpoint: W8A8 on an H100 (each input quantized on the fly, per tensor,
    per token or per token group: the rowwise rate for the last two), weight-only on an A100 (no fp8 peak), and
    as --dtype says where it is given."""
    args = ("qwen3-30b-a3b", "--mode", "prefill", "--seq", "2048", "--weights-dtype", weights)
    served = _timed(run, *args, "--hardware", "h100")
    assert (served["matmul_dtype"], served["fp8_scaling"]) == ("fp8", scaling)
    assert served == _timed(run, *args, "--hardware", "h100", "--dtype", "fp8", "--fp8-scaling", scaling)
    weight_only = _timed(run, *args, "--hardware", "h100", "--dtype", "bf16")
    assert (weight_only["matmul_dtype"], weight_only["fp8_scaling"]) == ("bf16", None)
    q = served["components"]["attention/q"]
    assert q["compute_s"] == pytest.approx(q["matmul_flops"] / FP8 + q["elementwise_flops"] / FP32, rel=1e-12)
    ampere = _timed(run, *args, "--hardware", "a100-80gb")
    assert ampere == _timed(run, *args, "--hardware", "a100-80gb", "--dtype", "bf16")
    # training on an fp8 base (LoRA): the bf16 matmuls of --dtype's default, whatever the weights
    trained = _timed(run, "qwen3-8b", "--mode", "train", "--seq", "2048", "--hardware", "h100", "--lora-rank", "16",
                     "--weights-dtype", weights)
    assert (trained["matmul_dtype"], trained["fp8_scaling"]) == ("bf16", None)


def test_an_fp8_checkpoint_is_served_with_fp8_matmuls(run, tmp_path):
    """A config.json whose quantization_config is DeepSeek's fp8 blocks, without --weights-dtype."""
    raw = json.loads((Path(__file__).parents[1] / "model_configs" / "hf" / "qwen3-8b.json").read_text())
    raw["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    data = _timed(run, str(path), "--hardware", "h100", "--mode", "decode", "--seq", "4096")
    assert (data["matmul_dtype"], data["fp8_scaling"], data["weights_dtype"]) == ("fp8", "rowwise", "fp8-block")
