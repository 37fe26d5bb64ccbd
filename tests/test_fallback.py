"""The fallback for a model_type no mapper reads (analysis/verify/fallback.py): `llmcalc params`
counts transformers' own model on meta, labelled "counted by transformers, not explained"; every
other command, and a missing hf extra, is one line and exit 2. The model types are ones llmcalc
cannot map (state-space, recurrent) or has no mapper for."""

import json
import sys
from pathlib import Path

import pytest

from llmcalc.analysis.load.hf import MAPPERS
from tests.console import error_line

LABEL = "counted by transformers, not explained"
DOCS = Path(__file__).parent.parent / "docs" / "huggingface.md"

# model_type -> (its config class's keys: a released checkpoint's shapes, or small ones; the
# published total of that checkpoint, None for the small ones)
CONFIGS = {
    # abeja/gpt-neox-japanese-2.7b's shapes (GPTNeoXJapaneseConfig's defaults); the total is transformers'
    "gpt_neox_japanese": (dict(vocab_size=32000, hidden_size=2560, num_hidden_layers=32, num_attention_heads=32,
                               intermediate_multiple_size=4, max_position_embeddings=2048), None),
    "rwkv": (dict(vocab_size=1000, hidden_size=64, num_hidden_layers=3, context_length=128), None),  # untied head
    # BERT's masked-LM head: the embedding's weight and a bias of its own (an encoder: no mapper)
    "bert": (dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96),
             None),
    "xlstm": (dict(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_heads=4), None),
}
# The causal-LM families of transformers 5.23.0 that llmcalc's keys cannot count (docs/huggingface.md, Models
# without a mapper, gives each one's reason), at a small size: two layers of 64 (their padding token in the
# vocabulary, dots3-note's K/V heads as many as its heads, as their classes require)
_SMALL = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=96)
NEW_FAMILIES = {t: (_SMALL, None) for t in (
    "axk1", "axk2", "qwen4_exp_text", "inkling_text", "inkling2_text", "hrm_text", "zaya", "minimax_m3_vl_text",
    "mimo_v2_flash", "laguna", "jetmoe", "doge", "diffllama")}
NEW_FAMILIES.update({t: ({**_SMALL, "pad_token_id": 0}, None) for t in ("bailing_hybrid", "lfm3")})
NEW_FAMILIES["dots3_note_text"] = ({**_SMALL, "pad_token_id": 0, "num_key_value_heads": 4}, None)
CONFIGS.update(NEW_FAMILIES)


def _write(tmp_path, model_type: str, name: str = "config.json") -> str:
    import transformers

    keys, _ = CONFIGS[model_type]
    config = transformers.CONFIG_MAPPING[model_type](**keys).to_dict()
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


def _parameters(model_type: str) -> int:
    """transformers' model.parameters() on meta, each once, and its persistent buffers (the routers'
    e_score_correction_bias, Gemma's layer scalars: what a checkpoint stores beside them): an independent count."""
    import torch
    import transformers

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.CONFIG_MAPPING[model_type](
            **CONFIGS[model_type][0]))
    buffers = sum(b.numel() for m in model.modules() for name, b in m._buffers.items()
                  if b is not None and name not in m._non_persistent_buffers_set)
    return sum(p.numel() for p in model.parameters()) + buffers


@pytest.mark.unit
def test_the_types_have_no_mapper():
    assert not set(CONFIGS) & set(MAPPERS)


@pytest.mark.unit
@pytest.mark.parametrize("model_type", [*NEW_FAMILIES, "gemma4_unified", "gemma4_assistant", "gemma4_unified_assistant",
                                        "dots3_note", "qwen4_exp"])
def test_the_new_families_go_to_the_fallback(model_type):
    """No mapper (language model or multimodal) reads them, so `llmcalc params` hands them to transformers; the
    docs give each one's reason."""
    from llmcalc.analysis.errors import UnmappedModelType
    from llmcalc.analysis.load.hf import from_hf_config

    with pytest.raises(UnmappedModelType):
        from_hf_config({"model_type": model_type}, "config.json")
    section = DOCS.read_text().split("## Models without a mapper")[1].split("\n## ")[0]
    assert f"- `{model_type}`" in section or f"and the multimodal `{model_type}`" in section \
        or f"and `{model_type}`" in section


@pytest.mark.reference
def test_the_docs_give_every_unmapped_type_its_reason():
    """Every model_type transformers builds as a causal LM that no mapper (language model or multimodal)
    reads is named in the docs' Models without a mapper, with what llmcalc cannot count in it."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from llmcalc.analysis.load.hf import MULTIMODAL

    section = DOCS.read_text().split("## Models without a mapper")[1].split("\n## ")[0]
    unmapped = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - set(MAPPERS) - set(MULTIMODAL)
    assert unmapped and sorted(t for t in unmapped if f"`{t}`" not in section) == []


@pytest.mark.reference
@pytest.mark.parametrize("model_type", CONFIGS)
def test_params_counts_transformers_model(tmp_path, run, model_type):
    result = run("params", _write(tmp_path, model_type), "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    published = CONFIGS[model_type][1]
    assert record["total"] == _parameters(model_type) == (published or record["total"])
    assert record["counted_by"] == "transformers" and record["transformers_version"]
    assert record["model_type"] == model_type and record["active"] is None
    assert sum(record["components"].values()) == record["total"]
    for m in record["modules"]:
        assert m["per_layer"] is None or m["per_layer"] * m["layers"] == m["params"]


@pytest.mark.reference
def test_gpt_neox_japanese_module_by_module(tmp_path, run):
    """GPT-NeoX-Japanese 2.7B by hand: a fused q/k/v and an output projection without biases, but a
    bias on the last layer's output only (so its attention has no per-layer figure), a 4d MLP
    without biases, two LayerNorms per layer, a final LayerNorm, the LM head tied to the embedding."""
    record = json.loads(run("params", _write(tmp_path, "gpt_neox_japanese"), "--json").stdout)
    d, ff, layers, V = 2560, 4 * 2560, 32, 32000
    modules = {m["module"]: m for m in record["modules"]}
    prefix = "gpt_neox_japanese."
    assert modules[prefix + "layers.*.attention"] == {"module": prefix + "layers.*.attention", "layers": layers,
                                                      "per_layer": None, "params": layers * 4 * d * d + d}
    assert modules[prefix + "layers.*.mlp"]["per_layer"] == 2 * d * ff
    assert modules[prefix + "layers.*.input_layernorm"]["per_layer"] == 2 * d
    assert modules[prefix + "final_layer_norm"] == {"module": prefix + "final_layer_norm", "layers": 0,
                                                    "per_layer": None, "params": 2 * d}
    assert record["embedding"] == V * d and record["lm_head"] == 0 and record["tie_embeddings"]
    assert "lm_head" not in record["components"]  # tied: counted once, under the embedding
    assert record["total"] == V * d + layers * (4 * d * d + 2 * d * ff + 4 * d) + d + 2 * d == 2_598_837_760


@pytest.mark.reference
def test_a_tied_head_with_a_bias_is_tied(tmp_path, run):
    """BertLMHeadModel's decoder is the word embedding (tied) and a bias of vocab_size: tied, the bias its own."""
    record = json.loads(run("params", _write(tmp_path, "bert"), "--json").stdout)
    assert record["tie_embeddings"] and record["lm_head"] == 1000
    assert record["embedding"] == 1000 * 64
    table = run("params", _write(tmp_path, "bert")).stdout
    assert "LM head: tied to the embedding, counted once, with a bias of 1,000" in table


@pytest.mark.reference
def test_an_untied_head_is_counted(tmp_path, run):
    record = json.loads(run("params", _write(tmp_path, "rwkv"), "--json").stdout)
    assert not record["tie_embeddings"] and record["lm_head"] == record["embedding"] == 1000 * 64
    assert record["components"]["head"] == 1000 * 64


@pytest.mark.reference
@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_the_label_is_shown(tmp_path, run, fmt):
    result = run("params", _write(tmp_path, "gpt_neox_japanese", "gpt-neox-japanese-2.7b.json"), "--format", fmt)
    assert result.exit_code == 0, result.stderr
    assert LABEL in result.stdout and "2,598,837,760" in result.stdout and "gpt-neox-japanese-2.7b" in result.stdout


@pytest.mark.reference
def test_csv_rows_are_the_modules(tmp_path, run):
    import csv

    rows = list(csv.DictReader(run("params", _write(tmp_path, "gpt_neox_japanese"), "--format", "csv"
                                   ).stdout.splitlines()))
    assert {r["counted_by"] for r in rows} == {"transformers"}
    assert sum(int(r["params"]) for r in rows) == 2_598_837_760


@pytest.mark.reference
@pytest.mark.parametrize("args", [
    ["flops"], ["kvcache"], ["memory"], ["time", "--hardware", "h100"], ["verify"],
    ["plan", "--gpus", "8", "--hardware", "h100", "--seq", "2048", "--global-batch", "64"],
    ["params", "gpt2-small"], ["params", "--lora-rank", "8"],
])
def test_other_commands_refuse_it_in_one_line(tmp_path, run, args):
    path = _write(tmp_path, "rwkv")
    line = error_line(run(args[0], path, *args[1:]))
    assert "key 'model_type': 'rwkv' has no llmcalc mapper, so only `llmcalc params` counts it" in line
    assert "Models without a mapper" in line


@pytest.mark.reference
def test_a_model_type_transformers_does_not_know_either(tmp_path, run):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "no_such_model", "hidden_size": 64}')
    for command in ("params", "flops"):
        line = error_line(run(command, path))
        assert line.endswith("key 'model_type': unsupported Hugging Face model_type 'no_such_model'; the "
                             f"{len(MAPPERS)} supported are listed in the docs (Hugging Face configs, Supported model "
                             "types)\n"), line


@pytest.mark.reference
def test_architectures_naming_a_mapped_class_is_a_hint(tmp_path, run):
    """Kimi K2's config.json: model_type kimi_k2 (its own code), architectures DeepseekV3ForCausalLM: the message
    names deepseek_v3, and with it the file reads as DeepSeek-V3 does."""
    raw = {"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 64}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    for command in ("params", "kvcache"):
        line = error_line(run(command, path))
        assert line.endswith("key 'model_type': unsupported Hugging Face model_type 'kimi_k2'; its architectures "
                             "name DeepseekV3ForCausalLM: model_type 'deepseek_v3' reads it\n")
    path.write_text(json.dumps({**raw, "model_type": "deepseek_v3"}))
    assert run("params", path).exit_code == 0


KIMI_K2 = {  # moonshotai/Kimi-K2-Instruct's config.json, its architecture's keys (model_configs/kimi-k2.yaml)
    "model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
                 "AutoModel": "modeling_deepseek.DeepseekV3Model",
                 "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"},
    "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 64, "num_key_value_heads": 64,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "intermediate_size": 18432, "first_k_dense_replace": 1, "n_routed_experts": 384, "num_experts_per_tok": 8,
    "moe_intermediate_size": 2048, "n_shared_experts": 1, "vocab_size": 163840, "rope_theta": 50000.0,
    "tie_word_embeddings": False, "num_nextn_predict_layers": 0, "max_position_embeddings": 131072}


@pytest.mark.unit
def test_kimi_k2_reads_as_the_deepseek_v3_code_it_ships(tmp_path, run, monkeypatch):
    """Kimi K2's model_type kimi_k2 is DeepSeek-V3's code under another name (its auto_map's AutoConfig is
    configuration_deepseek.DeepseekV3Config; Moonshot's deployment guide: "Kimi-K2 reuses the DeepseekV3CausalLM
    architecture"): read as deepseek_v3, 1,026,408,232,448 parameters, the checkpoint's count. Without that
    AutoConfig it is refused with the hint, as any model_type of remote code (and, in the unit tier, where torch
    cannot be imported, how to install transformers' fallback)."""
    monkeypatch.chdir(tmp_path)  # a short path: the line with the install hint stays within LINE
    path = tmp_path / "config.json"
    path.write_text(json.dumps(KIMI_K2))
    result = run("params", "config.json", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["total"] == 1_026_408_232_448
    path.write_text(json.dumps({k: v for k, v in KIMI_K2.items() if k != "auto_map"}))
    assert ("its architectures name DeepseekV3ForCausalLM: model_type 'deepseek_v3' reads it"
            in error_line(run("params", "config.json")))


@pytest.mark.reference
def test_transformers_refusing_the_config_is_one_line(tmp_path, run):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "gpt_neox_japanese", "hidden_size": 64, "num_hidden_layers": 2, '
                    '"hidden_act": "no_such_act"}')
    assert "transformers cannot build this config" in error_line(run("params", path))


@pytest.mark.unit
def test_without_the_hf_extra_the_error_says_how_to_get_it(tmp_path, run, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers.models.auto.modeling_auto", None)  # import raises ImportError
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "gpt_neox_japanese"}')
    for command in ("params", "kvcache"):
        result = run(command, path)
        assert result.exit_code == 2 and result.stdout == "" and result.stderr.count("\n") == 1
        assert "unsupported Hugging Face model_type 'gpt_neox_japanese'; the" in result.stderr
        assert result.stderr.endswith("`llmcalc params` counts it through transformers: "
                                      "pip install 'llmcalc-exact[hf]'\n")


@pytest.mark.reference
def test_kimi_k2_verifies_against_transformers_as_deepseek_v3(tmp_path, run):
    """verify --against transformers builds a kimi_k2 file as its AutoConfig's class does (DeepseekV3Config): a
    small one (two layers, eight experts) agrees with transformers' DeepSeek-V3 on every check."""
    small = {**KIMI_K2, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
             "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
             "intermediate_size": 128, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
             "vocab_size": 256, "n_group": 1, "topk_group": 1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(small))
    result = run("verify", path, "--against", "transformers", "--seq", "8", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"]
