"""`llmcalc verify --against transformers`: llmcalc's figures against transformers' own model
(on the meta device), and the shipped Hugging Face config.json of every bundled model."""

import json
import sys
import warnings

import pytest

from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.kvcache import kv_cache
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.load.catalog import bundled_names, load_model
from llmcalc.analysis.load.hf import MAPPERS
from llmcalc.analysis.model.layers import layer_specs
from llmcalc.analysis.spec import RunSpec
from llmcalc.analysis.verify import against
from llmcalc.analysis.verify.meta_kernels import use_cpp_meta

pytestmark = pytest.mark.reference

ARGS = ("--against", "transformers", "--seq", "16", "--batch", "1")


@pytest.mark.parametrize("name", ["gpt2-small", "pythia-410m", "mistral-7b", "mixtral-8x7b", "gemma-2-9b"])
def test_bundled_models_match_transformers(run, name):
    result = run("verify", name, *ARGS, "--json")
    assert result.exit_code == 0, result.stdout
    data = json.loads(result.stdout)
    assert (data["model"], data["against"], data["ok"]) == (name, "transformers", True)
    names = [c["name"] for c in data["checks"]]
    for prefix in ("transformers/params/total", "transformers/params/embedding/token",
                   "transformers/flops/eager/forward/total", "transformers/flops/eager/backward/total",
                   "transformers/flops/eager/forward/attention/scores+values", "transformers/kv_cache/prefill"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert not any("unmatched" in n for n in names)  # every transformers module name maps
    assert all(c["analytic"] == c["measured"] for c in data["checks"])


def test_mla_moe_config_json_matches_transformers(run, tmp_path):
    """A DeepSeek-V3-shaped config.json written by transformers' own config class: MLA with a
    low-rank query, a dense first layer, routed and shared experts."""
    from transformers import DeepseekV3Config

    cfg = DeepseekV3Config(vocab_size=1000, hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
                           num_hidden_layers=3, first_k_dense_replace=1, num_attention_heads=4,
                           num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2, n_group=1,
                           topk_group=1, n_shared_experts=1, q_lora_rank=64, kv_lora_rank=32,
                           qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.to_dict()))
    result = run("verify", path, *ARGS, "--json")
    assert result.exit_code == 0, result.stdout
    names = [c["name"] for c in json.loads(result.stdout)["checks"]]
    for key in ("attention/kv_b", "attention/q_a_norm", "moe/experts", "moe/shared_experts", "mlp/gate"):
        assert f"transformers/params/{key}" in names, key


EXTRA = {"deepseek_v2": {"n_routed_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 1},
         "deepseek_v3": {"first_k_dense_replace": 1},
         # their classes' default head_dim (None) is one their attention fails on
         "hunyuan_v1_dense": {"head_dim": 128}, "ministral": {"head_dim": 128},
         # NemotronConfig has no default: transformers fails without it
         "nemotron": {"num_key_value_heads": 8},
         # mixture-of-experts decoders: the branches their defaults leave off
         "granitemoeshared": {"shared_intermediate_size": 1024}, "phimoe": {"sliding_window": 16},
         "hunyuan_v1_moe": {"head_dim": 128}, "minimax_m2": {"num_local_experts": 8},
         "dots1": {"n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
                   "max_window_layers": 2},
         # Cohere's North (compass): its class's default rope_parameters ({}) has no entry for its layers' type
         "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4}}},
         # GPT-Neo's attention_types must expand to its 4 layers
         "gpt_neo": {"attention_types": [[["global", "local"], 2]]},
         # DBRX's attention fails without attn_config.rope_theta; its model runs with real weights on the
         # CPU (against.NOT_ON_META): small
         # the hybrids: an attention layer among the Mamba-2 ones (transformers' Granite 4.0-H cache fails
         # without one)
         "bamba": {"attn_layer_indices": [1]},
         # LFM2: its class's default (full_attn_idxs null) makes every layer attend
         "lfm2": {"full_attn_idxs": [1]},
         # LFM2-MoE: its class has no default layer_types (transformers fails without one)
         "lfm2_moe": {"layer_types": ["conv", "full_attention", "conv", "conv"], "num_dense_layers": 1},
         "granitemoehybrid": {"layer_types": ["mamba", "attention", "mamba", "mamba"]},
         "dbrx": {"d_model": 64, "n_heads": 4, "vocab_size": 1000, "max_seq_len": 64,
                  "attn_config": {"kv_n_heads": 2, "rope_theta": 1e4, "clip_qkv": 8},
                  "ffn_config": {"ffn_hidden_size": 96, "moe_num_experts": 4, "moe_top_k": 2}}}


# Jamba's defaults put the first attention layer at index 4: attention (with MoE) at layer 3 of 4 instead.
# transformers' Jamba runs its experts as the model does (experts_per_token per token, batched_mm), its
# mamba mixers on the slow path (the recurrent scan, on meta): no convention to translate
EXTRA["jamba"] = {"attn_layer_period": 4, "attn_layer_offset": 3}
# Nemotron-H: its class's default blocks (M, E, *, -) put an MLP layer where llmcalc's every-second-layer MoE
# step would have a MoE one: a Mamba-2 layer, an MLP one, an attention one and a MoE one instead
EXTRA["nemotron_h"] = {"layers_block_type": ["linear_attention", "mlp", "full_attention", "moe"]}
# MiniMax: blocks of 3, so that the 8 tokens span three lightning blocks, the last one partial
EXTRA["minimax"] = {"block_size": 3}
# Kimi Linear: its class default makes the fifth layer its first MLA one (transformers' cache needs one): layer 1
EXTRA["kimi_linear"] = {"layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention"]}
# Gemma 4: its class default (hidden_size_per_layer_input 256) turns on per-layer embeddings, refused
EXTRA["gemma4_text"] = {"hidden_size_per_layer_input": 0}
# Gemma 3n: 4 layers, the last 2 reading earlier K/V (the class's 15 need more), a full layer, 2 sparse layers
EXTRA["gemma3n_text"] = {"num_kv_shared_layers": 2, "layer_types": ["sliding_attention", "full_attention"] * 2,
                         "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0]}
# LongCat-Flash runs on the CPU (against.NOT_ON_META): its checkpoint's experts (512 and 256 identity ones), small
EXTRA["longcat_flash"] = dict(vocab_size=1000, hidden_size=64, num_attention_heads=4, ffn_hidden_size=96,
                              q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, head_dim=8,
                              v_head_dim=8, moe_topk=3, expert_ffn_hidden_size=32, max_position_embeddings=64)

# Gemma 4 12B (gemma4_unified_text): its published full layers, one K/V head whose values are its keys, and softcap
EXTRA["gemma4_unified_text"] = {"attention_k_eq_v": True, "num_global_key_value_heads": 1,
                                "final_logit_softcapping": 30.0}

# Zamba2: its class default puts the first hybrid layer at index 6: three of 4 instead, two blocks used in turn, with
# every branch its defaults leave off (adapters on q, k and v, RoPE, biases, the mixer's norm in groups)
EXTRA["zamba2"] = dict(layers_block_type=["mamba", "hybrid", "hybrid", "hybrid"], num_mem_blocks=2,
                       use_shared_attention_adapter=True, use_mem_rope=True, add_bias_linear=True, mamba_ngroups=2)


# Zamba: its class default puts one hybrid layer in 4 (tied, transformers cannot build it): layers 2 and 3, four
# Mamba heads, GQA
EXTRA["zamba"] = dict(attn_layer_period=2, attn_layer_offset=0, n_mamba_heads=4, num_key_value_heads=4)


@pytest.mark.parametrize("model_type", sorted(MAPPERS))
def test_every_model_type_matches_transformers(model_type, tmp_path):
    """A config written by transformers' own config class (its defaults: published shapes, with
    4 layers: num_hidden_layers, which each class's attribute_map gives its own name), read by
    llmcalc, against transformers' model: every check exact, every module name mapped."""
    from transformers import AutoConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = AutoConfig.for_model(model_type, num_hidden_layers=4, **EXTRA.get(model_type, {})).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    device = "cpu" if model_type in against.NOT_ON_META else "meta"
    checks = against.against_transformers(load_model(str(path)), raw, 8, 1, str(path), device)
    assert [c for c in checks if not c.ok or "unmatched" in c.name] == []


def _off_by_one_params(real):
    def count(cfg):
        p = real(cfg)
        return p._replace(components={**p.components, "lm_head": p.components.get("lm_head", 0) + 1},
                          total=p.total + 1, active=p.active + 1)
    return count


def _off_by_one_flops(real):
    def count(cfg, run):
        r = real(cfg, run)
        fwd = r.forward.__class__({**r.forward.matmul, "mlp/up": r.forward.matmul["mlp/up"] + 1},
                                  r.forward.elementwise)
        return r.__class__(r.run, fwd, r.backward, r.groups)
    return count


@pytest.mark.parametrize("target, patch, prefix, component", [
    ("count_params", _off_by_one_params, "transformers/params", "lm_head"),
    ("count_flops", _off_by_one_flops, "transformers/flops/eager/forward", "mlp/up"),
])
def test_wrong_formula_fails_with_exit_1_naming_the_component(run, monkeypatch, target, patch, prefix, component):
    monkeypatch.setattr(against, target, patch(getattr(against, target)))
    result = run("verify", "pythia-410m", *ARGS)
    assert result.exit_code == 1
    failed = {line.split(":")[1].split()[0] for line in result.stdout.splitlines() if " differs: " in line}
    assert failed == {f"{prefix}/{component}", f"{prefix}/total"}


def test_sliding_window_convention():
    """transformers keeps min(S, W - 1) tokens of a sliding layer between steps; llmcalc's decode
    at context S + 1 holds min(S + 1, W): exactly one more token on every layer, full or sliding."""
    for name in ("mistral-7b", "gemma-2-9b"):
        cfg = load_model(name)
        for prefill in (16, 4095, 4096, 4099):
            ours = kv_cache(cfg, RunSpec("decode", prefill + 1, 2, kv_dtype="fp32"))
            assert against.transformers_kv_bytes(cfg, 2, prefill) + 2 * ours.bytes_per_token == ours.bytes


def _llama4(tmp_path, **changes):
    from transformers import AutoConfig

    raw = AutoConfig.for_model("llama4_text", num_hidden_layers=4, **changes).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return load_model(str(path)), raw, path


def test_chunked_attention_convention(tmp_path):
    """transformers caches a chunked layer as a sliding one, min(S, C - 1) tokens after a prefill of
    S; llmcalc's decode at context S + 1 holds min(S + 1, C), a buffer of C: one token more, as on
    a sliding layer."""
    cfg, _, _ = _llama4(tmp_path, attention_chunk_size=8)
    chunked = sum(1 for s in layer_specs(cfg) if s.chunk == 8)
    assert chunked == 3
    per_token = 2 * cfg.kv_width * 4  # fp32 K and V of one layer
    for prefill in (5, 7, 8, 9, 16, 21):
        ours = kv_cache(cfg, RunSpec("decode", prefill + 1, 2, kv_dtype="fp32"))
        theirs = against.transformers_kv_bytes(cfg, 2, prefill)
        full = 2 * (prefill + 1) * per_token  # the NoPE layer: every token
        assert ours.bytes == full + chunked * 2 * min(prefill + 1, 8) * per_token
        assert theirs == 2 * prefill * per_token + chunked * 2 * min(prefill, 7) * per_token


def test_llama4_expert_flops_closed_form(tmp_path):
    """transformers' Llama4TextExperts run every expert on every token, so its expert FLOPs are
    not the model's: against.py compares them x num_experts / experts_per_token (labelled). The
    model's MoE FLOPs, per token of a MoE layer: k routed experts and the shared expert, three
    d x f matrices each, and the d -> E router."""
    cfg, raw, path = _llama4(tmp_path, interleave_moe_layer_step=2, num_local_experts=8, num_experts_per_tok=2)
    d, f, E, k, T = 5120, 8192, 8, 2, 8
    moe_layers = 2  # layers 1 and 3
    fwd = count_flops(cfg, RunSpec("train", 8, 1, "eager")).forward.matmul
    assert fwd["moe/experts"] == moe_layers * T * k * 3 * 2 * d * f
    assert fwd["moe/shared_experts"] == moe_layers * T * 3 * 2 * d * f
    assert fwd["moe/router"] == moe_layers * T * 2 * d * E
    assert fwd["mlp/up"] == 2 * T * 2 * d * 16384  # the dense layers: intermediate_size_mlp
    checks = {c.name: c for c in against.against_transformers(cfg, raw, 8, 1, str(path))}
    assert all(c.ok for c in checks.values())
    experts = checks["transformers/flops/eager/forward/moe/experts"]
    assert experts.measured == moe_layers * T * E * 3 * 2 * d * f and experts.note == against.EVERY_EXPERT
    assert checks["transformers/flops/eager/forward/moe/shared_experts"].note == ""
def _hf_model(tmp_path, model_type, **hp):
    from transformers import AutoConfig

    path = tmp_path / "config.json"
    path.write_text(json.dumps(AutoConfig.for_model(model_type, **hp).to_dict()))
    return load_model(str(path))


@pytest.mark.parametrize("prefill", [16, 255, 256, 300])
def test_gpt_neo_cache_convention(tmp_path, prefill):
    """GPT-Neo (EleutherAI/gpt-neo-125m): transformers' cache keeps every one of the S prefill tokens
    on every layer, its local layers too (their window W is a mask only); llmcalc's decode at context
    S + 1 holds S + 1 tokens of a global layer and min(S + 1, W) of a local one (a serving engine's
    rolling buffer). So llmcalc's figure is transformers' plus one token on every layer, less the
    S + 1 - min(S + 1, W) tokens each local layer drops."""
    cfg = _hf_model(tmp_path, "gpt_neo", vocab_size=50257, hidden_size=768, num_layers=12, num_heads=12,
                    attention_types=[[["global", "local"], 6]], window_size=256)
    window, n_local = 256, 6
    per_token = 2 * 768 * 4 * 2  # K and V of 768 values, fp32, batch 2: per layer
    ours = kv_cache(cfg, RunSpec("decode", prefill + 1, 2, kv_dtype="fp32")).bytes
    theirs = against.transformers_kv_bytes(cfg, 2, prefill, model_type="gpt_neo")
    assert theirs == 12 * prefill * per_token
    assert ours == theirs + 12 * per_token - n_local * (prefill + 1 - min(prefill + 1, window)) * per_token


def test_openai_gpt_keeps_no_cache_in_transformers(tmp_path):
    """OpenAI GPT (openai-community/openai-gpt): transformers' model keeps no KV cache (the check
    against it compares 0 with 0); llmcalc's decode at context S holds S tokens of K and V, 768
    values each, on each of its 12 layers."""
    cfg = _hf_model(tmp_path, "openai-gpt")  # its class's defaults are the checkpoint's shapes
    assert against.transformers_kv_bytes(cfg, 2, 100, model_type="openai-gpt") == 0
    for context in (1, 100, 512):
        assert kv_cache(cfg, RunSpec("decode", context, 2, kv_dtype="fp32")).bytes == 12 * context * 2 * 768 * 4 * 2


def test_dbrx_cannot_run_on_meta(run, tmp_path):
    """DBRX's experts loop over the experts a batch routes to (data dependent), which meta cannot
    run: `verify --against transformers` refuses it in one line (the tests run it on the CPU)."""
    from transformers import AutoConfig

    path = tmp_path / "config.json"
    path.write_text(json.dumps(AutoConfig.for_model("dbrx", num_hidden_layers=2, **EXTRA["dbrx"]).to_dict()))
    result = run("verify", path, *ARGS)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "cannot run on the meta device" in result.stderr


def test_yaml_without_hf_config_exits_2(run, config_file):
    path = config_file((against.HF_DIR.parent / "gpt2-small.yaml").read_text().replace("gpt2-small", "mine"))
    result = run("verify", path, *ARGS)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "needs a Hugging Face config.json" in result.stderr


def test_without_transformers_says_how_to_install(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    result = run("verify", "gpt2-small", *ARGS)
    assert result.exit_code == 2
    assert result.stderr == ("Error: --against transformers needs transformers: pip install transformers==5.23.0 "
                             "(from llmcalc's source tree: pip install -e '.[hf]')\n")


def test_bad_against_value(run):
    result = run("verify", "gpt2-small", "--against", "vllm")
    assert (result.exit_code, result.stderr) == (
        2, "Error: Invalid value for '--against': 'vllm' is not one of 'transformers'.\n")


SHIPPED = sorted(p.stem for p in against.HF_DIR.glob("*.json"))


def test_hf_configs_shipped_for_the_original_bundled_models():
    assert set(SHIPPED) >= {"gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-2-7b", "llama-3-8b",
                            "mistral-7b", "mixtral-8x7b", "qwen2.5-0.5b", "gemma-2-9b", "olmo-2-7b",
                            "pythia-410m"}
    assert set(SHIPPED) <= set(bundled_names())


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_hf_config_reads_as_the_yaml(name):
    """The shipped config.json, read by llmcalc's Hugging Face mapper, gives the bundled YAML's
    parameters and forward FLOPs."""
    yaml_cfg, hf_cfg = load_model(name), load_model(str(against.HF_DIR / f"{name}.json"))
    assert count_params(hf_cfg).components == count_params(yaml_cfg).components
    run = RunSpec("train", 64, 1, "eager")
    assert count_flops(hf_cfg, run).forward.matmul == count_flops(yaml_cfg, run).forward.matmul


def test_device_does_not_apply_to_against(run):
    result = run("verify", "gpt2-small", *ARGS, "--device", "cpu", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["device"] == "meta"
    assert result.stderr == "Warning: --device cpu does not apply to --against transformers (built on meta); ignored\n"


@pytest.mark.parametrize("model_type", ["deepseek_v32", "glm_moe_dsa"])
def test_dsa_attention_flops_closed_form(tmp_path, model_type):
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5) with a top-k below the sequence: transformers'
    attention scores all S keys and masks all but the indexer's top k (against.py compares it with
    llmcalc's figure x S / min(S, k), labelled EVERY_KEY); the model attends to min(seen, k) keys per
    query. Parameters and the cache (latent, shared RoPE key and the indexer's key per token) are
    transformers' exactly; the indexer (q.k of its n heads of D, then their weighted sum) scores all
    S x S pairs, forward only."""
    from transformers import AutoConfig

    raw = AutoConfig.for_model(model_type, num_hidden_layers=4, index_topk=3).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    cfg = load_model(str(path))
    S, k, L, h, n, D = 8, 3, 4, raw["num_attention_heads"], raw["index_n_heads"], raw["index_head_dim"]
    d_qk, d_v = raw["qk_nope_head_dim"] + raw["qk_rope_head_dim"], raw["v_head_dim"]
    report = count_flops(cfg, RunSpec("train", S, 1, "eager"))
    fwd = report.forward.matmul
    assert fwd["attention/scores"] == L * 2 * h * S * k * d_qk and fwd["attention/values"] == L * 2 * h * S * k * d_v
    assert fwd["attention/indexer"] == L * 2 * n * S * S * (D + 1)
    assert "attention/indexer" not in report.backward.matmul
    checks = {c.name: c for c in against.against_transformers(cfg, raw, S, 1, str(path))}
    assert [c for c in checks.values() if not c.ok or "unmatched" in c.name] == []
    core = checks["transformers/flops/eager/forward/attention/scores+values"]
    assert core.measured == L * 2 * h * S * S * (d_qk + d_v) and core.note == against.EVERY_KEY
    assert checks["transformers/flops/eager/forward/attention/indexer"].measured == L * 2 * n * S * S * (D + 1)
    assert checks["transformers/flops/eager/forward/attention/indexer/wq_b"].note == ""


def test_longcat_identity_experts_closed_form(tmp_path):
    """LongCat-Flash's identity experts: a token's FLOPs depend on how many of its k choices reach real experts.
    llmcalc counts the share routing balanced over all E + Z experts gives them, k*E/(E+Z) (2 of 3 here; 8 of
    12 in LongCat-Flash), per token of a MoE layer: three d x f matrices each, and the d -> E + Z router.
    transformers' model, its routers steered to that share, measures exactly that; steered to identity experts
    only, its experts compute nothing. Its stacked gate_up_proj holds Z rows more than the checkpoint's experts."""
    from transformers import AutoConfig

    raw = AutoConfig.for_model("longcat_flash", num_hidden_layers=4, n_routed_experts=4, zero_expert_num=2,
                               **EXTRA["longcat_flash"]).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    cfg = load_model(str(path))
    d, f, E, Z, T, moe_layers = 64, 32, 4, 2, 8, 2  # layers 0 and 2 of 4 sublayers
    fwd = count_flops(cfg, RunSpec("train", T, 1, "eager")).forward.matmul
    assert fwd["moe/experts"] == moe_layers * T * 2 * 3 * 2 * d * f
    assert fwd["moe/router"] == moe_layers * T * 2 * d * (E + Z)
    assert fwd["mlp/up"] == 4 * T * 2 * d * 96  # every sublayer's own MLP
    checks = {c.name: c for c in against.against_transformers(cfg, raw, T, 1, str(path), "cpu")}
    assert [c for c in checks.values() if not c.ok] == []
    experts = checks["transformers/flops/eager/forward/moe/experts"]
    assert experts.measured == fwd["moe/experts"] and experts.note == against.STEERED
    params = checks["transformers/params/moe/experts"]
    assert params.measured - count_params(cfg).components["moe/experts"] == moe_layers * Z * 2 * f * d
    assert params.note == against.PHANTOM
    import torch

    model = against.build_hf(raw, device="cpu")
    for m in model.modules():  # two choices, both identity experts: no expert matmul at all
        if hasattr(m, "e_score_correction_bias"):
            m.top_k = 2
            m.e_score_correction_bias.data = torch.tensor([0.0] * E + [2.0] * Z)
    measured, _ = against.measure_flops(model, cfg, 1, T)
    assert "moe/experts" not in measured and measured["moe/router"] == fwd["moe/router"]


def test_hy4_closed_form(tmp_path):
    """Hy4 (4 layers: indexers on layers 0 and 1, layers 2 and 3 reusing layer 1's top-k; layer 0 dense): its
    indexer scores all S x S pairs on the indexed layers alone, attention reads k of the keys per query on every
    layer, each cached token holds the latent and RoPE key, and an indexer key on the indexed layers; each
    branch's hyper-connection is a N*d -> 2N linear (no stream mix), the head's N*d -> N. transformers' model
    measures all of it (its attention dense over the keys, masked to the top-k: labelled)."""
    from transformers import AutoConfig

    raw = AutoConfig.for_model("hy_v4", num_hidden_layers=4, index_topk=3).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    cfg = load_model(str(path))
    assert [(s.topk, s.shared_topk, s.ffn) for s in layer_specs(cfg)] == [
        (3, False, "dense"), (3, False, "moe"), (3, True, "moe"), (3, True, "moe")]
    S, k, L, d, N = 8, 3, 4, raw["hidden_size"], raw["hc_mult"]
    h, n, D = raw["num_attention_heads"], raw["index_n_heads"], raw["index_head_dim"]
    d_qk, d_v = raw["qk_nope_head_dim"] + raw["qk_rope_head_dim"], raw["v_head_dim"]
    fwd = count_flops(cfg, RunSpec("train", S, 1, "eager")).forward.matmul
    pairs = S * k  # the dense convention: every query reads k of the S keys
    assert fwd["attention/scores"] == L * 2 * h * pairs * d_qk and fwd["attention/values"] == L * 2 * h * pairs * d_v
    assert fwd["attention/indexer"] == 2 * 2 * n * S * S * (D + 1)  # layers 0 and 1
    assert fwd["attention/gate"] == L * 2 * S * d * h * d_v
    assert fwd["hyper/attention"] == fwd["hyper/mlp"] == L * 2 * S * N * d * 2 * N
    assert fwd["hyper/head"] == 2 * S * N * d * N and "hyper/attention_mix" not in fwd
    cache = kv_cache(cfg, RunSpec("decode", S, 1, kv_dtype="fp32"))
    assert cache.bytes == S * 4 * (L * (raw["kv_lora_rank"] + raw["qk_rope_head_dim"]) + 2 * D)
    checks = {c.name: c for c in against.against_transformers(cfg, raw, S, 1, str(path))}
    assert [c for c in checks.values() if not c.ok or "unmatched" in c.name] == []
    assert checks["transformers/flops/eager/forward/attention/scores+values"].note == against.EVERY_KEY
    assert checks["transformers/flops/eager/forward/hyper/attention"].measured == fwd["hyper/attention"]

def test_gemma4_experts_beside_the_mlp_match_transformers(tmp_path):
    """Gemma 4 26B-A4B's layers (enable_moe_block: the experts beside every layer's MLP, moe.beside_mlp) at a
    small size: every check exact and every module name mapped (its router's scale and per-expert scales, the
    norms before the experts and after each FFN)."""
    from transformers import Gemma4TextConfig

    raw = {**Gemma4TextConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
        sliding_window=8, final_logit_softcapping=30.0, hidden_size_per_layer_input=0, enable_moe_block=True,
        num_experts=8, top_k_experts=2, moe_intermediate_size=24).to_dict(), "model_type": "gemma4_text"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    checks = {c.name: c for c in against.against_transformers(load_model(str(path)), raw, 8, 1, str(path))}
    assert [c for c in checks.values() if not c.ok or "unmatched" in c.name] == []
    for key in ("moe/router_norm", "moe/expert_scale", "norm/moe", "norm/dense_post", "norm/moe_post", "mlp/up"):
        assert f"transformers/params/{key}" in checks, key
    # 6 layers, 8 tokens, 2 experts each, three 64 x 24 matrices
    assert checks["transformers/flops/eager/forward/moe/experts"].measured == 6 * 8 * 2 * 3 * 2 * 64 * 24


@pytest.mark.parametrize("model_type", ["deepseek_v3", "jamba", "qwen3_next"])
def test_cpp_meta_kernels_measure_what_torchs_default_does(model_type, tmp_path):
    """verify runs the meta device on torch's C++ meta functions (analysis/verify/meta_kernels.py),
    over torch's default Python ones: transformers' model (MLA and experts, the Mamba scan, Gated
    DeltaNet) measures the same under both, every check's figures."""
    from transformers import AutoConfig

    raw = AutoConfig.for_model(model_type, num_hidden_layers=4, **EXTRA.get(model_type, {})).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    measured = []
    for cpp in (False, True):
        use_cpp_meta(cpp)
        try:
            measured.append(against.against_transformers(load_model(str(path)), raw, 8, 1, str(path)))
        finally:
            use_cpp_meta(True)  # the tests' (tests/conftest.py)
    assert measured[0] == measured[1] and all(c.ok for c in measured[1])


def test_cpp_meta_kernels_verify_as_torchs_default_does(bundled_copy):
    """The same for the reference modules: verify's every check (parameters, FLOPs, activations, the
    cache), for a model with a window, GQA and experts."""
    from llmcalc.analysis.verify.report import verify

    cfg = load_model(str(bundled_copy("mixtral-8x7b", 2)))
    outputs = []
    for cpp in (False, True):
        use_cpp_meta(cpp)
        try:
            outputs.append(verify(cfg, "meta", 8, 1))
        finally:
            use_cpp_meta(True)
    assert outputs[0] == outputs[1] and all(c.ok for c in outputs[1])
