"""Config validation through the CLI: exit code 2, one line on stderr naming file, key, line."""

import dataclasses
import importlib
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llmcalc.analysis.cluster.memory import memory
from llmcalc.analysis.count.activations import activation_bytes
from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.kvcache import kv_cache
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.errors import ConfigError, SpecError
from llmcalc.analysis.load.catalog import load_bundled, load_model
from llmcalc.analysis.model.architecture import MIXERS, build
from llmcalc.analysis.model.attention import ATTENTION as ATTENTION_KINDS
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.model.config import LAYER_TYPES, NORM_PLACEMENTS, PARALLEL_MIXERS, QK_NORMS, ModelConfig
from llmcalc.analysis.model.formats import WEIGHT_FORMATS
from llmcalc.analysis.model.gemma3n import Gemma3nConfig
from llmcalc.analysis.model.hyper import HyperConfig
from llmcalc.analysis.model.layers import layer_plan
from llmcalc.analysis.model.mamba import MIXER_NORMS
from llmcalc.analysis.model.mla import DSAConfig, MLAConfig
from llmcalc.analysis.model.moe import MoEConfig
from llmcalc.analysis.model.rules import APPLIES
from llmcalc.analysis.model.shared_transformer import SharedTransformerConfig
from llmcalc.analysis.model.sizes import DTYPE_BITS
from llmcalc.analysis.model.variants import ACTIVATIONS, NORMS, POSITIONS
from llmcalc.analysis.model.vision import (
    VISION_ACTIVATIONS,
    VISION_NORM_PLACEMENTS,
    VISION_POSITIONS,
    ProjectorConfig,
    VisionConfig,
)
from llmcalc.analysis.spec import Layout, LoRA, RunSpec
from tests.strategies import BASE as BASE_DICT
from tests.strategies import QUANT_SKIPS, VARIANTS, valid_configs

pytestmark = pytest.mark.unit

BASE = """name: t
vocab_size: 1000
context_length: 64
d_model: 64
n_layers: 2
n_heads: 4
d_ff: 256
"""


@pytest.mark.parametrize("text, message", [
    (BASE.replace("d_ff: 256\n", ""), "key 'd_ff': missing required key"),
    (BASE + "n_head: 3\n", ":8: key 'n_head': unknown key (did you mean 'n_heads'?)"),
    (BASE + "n_kv_heads: 3\n", ":8: key 'n_kv_heads': must divide n_heads (4), got 3"),
    (BASE.replace("d_model: 64", "d_model: 66"),
     ":6: key 'n_heads': must divide d_model (66) when head_dim is not given, got 4"),
    (BASE.replace("d_model: 64", "d_model: 0"), ":4: key 'd_model': must be >= 1, got 0"),
    (BASE.replace("n_layers: 2", "n_layers: -3"), ":5: key 'n_layers': must be >= 1, got -3"),
    (BASE.replace("d_model: 64", "d_model: 6.5"), ":4: key 'd_model': must be an integer, got 6.5"),
    (BASE.replace("d_model: 64", "d_model: '64'"),
     ":4: key 'd_model': must be an integer, got '64'"),
    (BASE.replace("d_model: 64", "d_model: true"),
     ":4: key 'd_model': must be an integer, got True"),
    (BASE + "activation: swiglo\n", ":8: key 'activation': unknown value 'swiglo' (did you mean "
     "'swiglu'?); expected one of: relu, gelu, silu, sqrelu, swiglu, geglu, reglu"),
    (BASE + "norm: batchnorm\n", ":8: key 'norm': unknown value 'batchnorm'"),
    (BASE + "position: rotary\n", ":8: key 'position': unknown value 'rotary'"),
    (BASE + "norm_placement: middle\n", ":8: key 'norm_placement': unknown value 'middle'"),
    (BASE + "moe: {num_experts: 2, experts_per_token: 3}\n",
     ":8: key 'moe': experts_per_token (3) exceeds num_experts (2)"),
    (BASE + "moe: {num_experts: 2}\n", ":8: key 'moe.experts_per_token': missing required key"),
    (BASE + "moe: {num_experts: 2, experts_per_token: 0}\n",
     ":8: key 'moe.experts_per_token': must be >= 1, got 0"),
    (BASE + "parallel_norms: 1.0\n", ":8: key 'parallel_norms': must be 1 or 2, got 1.0"),
    (BASE + "position: relative\nrelative_buckets: 8\nrelative_max_distance: 4\n",
     ":10: key 'relative_max_distance': must exceed relative_buckets // 2 (4), got 4"),
    (BASE + "? [1, 2]\n: 3\n", ":8: not valid YAML: found unhashable key"),
    (BASE + "qkv_bias: yes please\n", ":8: key 'qkv_bias': must be true or false"),
    (BASE + "d_model: 128\n", ":8: key 'd_model': duplicate key (first on line 4)"),
    ("name: [1, 2\n", "not valid YAML"),
    ("- 1\n- 2\n", "expected a mapping of config keys, got list"),
    ("", "empty: expected a mapping of config keys"),
    ("!!python/object/apply:os.system ['echo hacked']\n",
     ":1: YAML tags that construct objects are not allowed (plain YAML only)"),
    (BASE + "x: !!python/object/new:os.system [echo]\n",
     ":8: YAML tags that construct objects are not allowed"),
])
def test_bad_config_exits_2_with_one_line(tmp_path, run, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = run("params", path)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"Error: {path}")
    assert message in result.stderr


@pytest.mark.parametrize("data", [bytes(range(256)) * 4, b"\xff\xfe\x00\x01", b"\x89PNG\r\n\x1a\n\x00"])
def test_binary_junk_exits_2(tmp_path, run, data):
    path = tmp_path / "junk.yaml"
    path.write_bytes(data)
    result = run("params", path)
    assert result.exit_code == 2
    assert result.stderr == f"Error: {path}: not a YAML or JSON file (not UTF-8 text)\n"


def test_unknown_model_suggests_names(run):
    result = run("params", "gpt2-xxl")
    assert result.exit_code == 2
    assert result.stderr == ("Error: unknown model 'gpt2-xxl'; did you mean gpt2-xl, gpt2-small, "
                             "gpt2-large? (`llmcalc models` lists them)\n")


def test_missing_file(run):
    result = run("params", "no/such/model.yaml")
    assert (result.exit_code, result.stderr) == (2, "Error: no/such/model.yaml: no such file\n")


def test_real_process_has_no_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BASE + "n_kv_heads: 3\n")
    proc = subprocess.run([sys.executable, "-m", "llmcalc.cli", "params", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 2
    assert proc.stderr == f"Error: {path}:8: key 'n_kv_heads': must divide n_heads (4), got 3\n"


def test_analysis_never_imports_torch():
    code = ("import sys, pkgutil, importlib, llmcalc.analysis as analysis; "
            "from llmcalc.analysis.load.catalog import load_bundled; "
            "from llmcalc.analysis.count.params import count_params; "
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(analysis.__path__, 'llmcalc.analysis.') "
            "if '.verify' not in m.name]; "
            "from llmcalc.cli.app import app; count_params(load_bundled('gpt2-xl')); "
            "from typer.testing import CliRunner; r = CliRunner().invoke(app, ['params', 'gpt2-xl']);"
            "assert r.exit_code == 0; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


MIXTRAL_JSON = """{
	"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
	"vocab_size": 32000, "max_position_embeddings": 32768, "hidden_size": 4096,
	"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
	"intermediate_size": 14336, "hidden_act": "silu", "rope_theta": 1e6,
	"num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": null,
	"tie_word_embeddings": false, "torch_dtype": "bfloat16"
}"""


def test_hf_config_json_read_as_json(tmp_path, run):
    # tabs and 1e6 are JSON but not YAML 1.1: the file must be read as JSON
    path = tmp_path / "config.json"
    path.write_text(MIXTRAL_JSON)
    data = json.loads(run("params", path, "--json").stdout)
    assert (data["total"], data["active"]) == (46_702_792_704, 12_879_925_248)


def test_hf_mistral_window(tmp_path, run):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "mistral", "_name_or_path": "mistralai/Mistral-7B-v0.1", '
                    '"vocab_size": 32000, "max_position_embeddings": 32768, "hidden_size": 4096, '
                    '"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, '
                    '"intermediate_size": 14336, "rope_theta": 10000.0, "sliding_window": 4096, '
                    '"tie_word_embeddings": false, "torch_dtype": "bfloat16"}')
    assert json.loads(run("params", path, "--json").stdout)["total"] == 7_241_732_096
    kv = json.loads(run("kvcache", path, "--seq", "8192", "--json").stdout)
    assert kv["cached_tokens"] == 4096


@pytest.mark.parametrize("text, message", [
    ('{"model_type": ["x"]}', "key 'model_type': must be a string, got ['x']"),
    ('{"model_type": "t5"}', "key 'model_type': unsupported Hugging Face model_type 't5'"),
    ('{"model_type": "deepseek_v2", "vocab_size": 10}', "key 'num_experts_per_tok': missing Hugging Face key"),
    ('{"model_type": "llama", "hidden_size": null}', "key 'hidden_size': is null, but a value is needed"),
    (MIXTRAL_JSON.replace('"silu"', '"tanh"'), "key 'hidden_act': unsupported activation 'tanh'"),
    ('{"model_type": "llama",', "not valid JSON: Expecting property name enclosed in double quotes"),
])
def test_hf_config_errors(tmp_path, run, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    result = run("params", path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert message in result.stderr


def test_yaml_reads_1e6_as_a_number(tmp_path, run):
    path = tmp_path / "m.yaml"
    path.write_text(BASE + "position: rope\nrope_theta: 1e6\n")
    assert run("params", path).exit_code == 0
    path.write_text(BASE + "rope_theta: .inf\n")
    assert run("params", path).stderr == f"Error: {path}:8: key 'rope_theta': must be a positive number, got inf\n"


def _corruptions():
    bad_values = st.one_of(st.integers(-5, 0), st.floats(allow_nan=True), st.text(max_size=5),
                           st.none(), st.lists(st.integers(), max_size=2))
    return st.tuples(st.sampled_from(["vocab_size", "context_length", "d_model", "n_layers",
                                      "n_heads", "d_ff", "activation", "norm", "position",
                                      "norm_placement", "qkv_bias", "moe", "extra_key", "drop"]),
                     bad_values)


@settings(max_examples=200, deadline=None)
@given(valid_configs(), _corruptions())
def test_random_invalid_configs_raise_config_error(raw, corruption):
    key, value = corruption
    assume(not (key == "moe" and value is None))  # `moe: null` is the valid default
    # d_ff 0 (no FFN) is valid beside recurrent layers (the strategy draws them at layer 0)
    recurrent = {"mamba", "mamba2", "short_conv", "lightning", "gated_deltanet", "rglru", "kda"}
    assume(not (key == "d_ff" and value == 0 and recurrent & set(raw.get("layer_types") or ())))
    if key == "drop":
        del raw["d_ff"]
    else:
        raw[key] = value
    with pytest.raises(ConfigError):
        from_dict(raw, "random.yaml")


# -- the new keys: each rule gives exit 2, one line, the key and the YAML line ---------------

MLA = "mla: {kv_lora_rank: 8, qk_nope_head_dim: 4, qk_rope_head_dim: 2, v_head_dim: 4}\n"
MOE = "moe: {num_experts: 4, experts_per_token: 2"


@pytest.mark.parametrize("text, fragments", [
    # per-layer attention span
    (BASE + "layer_types: [sliding, full]\n",
     [":8: key 'layer_types': has 'sliding' layers but sliding_window is not set"]),
    (BASE + "sliding_window: 4\nlayer_types: [sliding, global]\n",
     [":9: key 'layer_types': unknown value 'global'", "expected one of: full, sliding"]),
    (BASE + "sliding_window: 4\nlayer_types: []\n", [":9: key 'layer_types': must be a non-empty list"]),
    (BASE + "sliding_window: 4\nlayer_types: sliding\n", [":9: key 'layer_types': must be a non-empty list"]),
    # layers without positions
    (BASE + "rope_layers: [true, false]\n", [":8: key 'rope_layers': applies only to position: rope; delete it"]),
    (BASE + "position: rope\nrope_layers: [true, 0]\n", [":9: key 'rope_layers': must be true or false, got 0"]),
    # partial rotary: head size 16
    (BASE + "position: rope\nrotary_fraction: 0.1875\n",
     [":9: key 'rotary_fraction': RoPE needs an even, non-zero number of rotated dimensions",
      "int(16 * 0.1875) = 3"]),
    (BASE + "position: rope\nrotary_fraction: 0.05\n",
     [":9: key 'rotary_fraction': RoPE needs an even, non-zero number of rotated dimensions", "= 0"]),
    (BASE + "rotary_fraction: 1.5\n", [":8: key 'rotary_fraction': must be a positive number at most 1, got 1.5"]),
    (BASE + "rotary_fraction: 0\n", [":8: key 'rotary_fraction': must be a positive number"]),
    # multi-head latent attention
    (BASE + "attention: mla\n", [":8: ", "mla", "mapping"]),  # the line of `attention: mla`
    (BASE + MLA, [":8: key 'mla': applies only to attention: mla; delete it"]),
    (BASE + "attention: gqa\n", [":8: key 'attention': unknown value 'gqa'", "expected one of: mha, mla"]),
    (BASE + "attention: mla\nmla: 4\n", [":9: key 'mla': must be a mapping, got 4"]),
    (BASE + "attention: mla\n" + MLA + "n_kv_heads: 2\n",
     [":10: key 'n_kv_heads': applies only to attention other than mla"]),
    (BASE + "attention: mla\n" + MLA + "head_dim: 8\n",
     [":10: key 'head_dim': applies only to attention other than mla"]),
    (BASE + "attention: mla\n" + MLA + "qk_norm: true\n",
     [":10: key 'qk_norm': applies only to attention other than mla"]),
    (BASE + "attention_gate: 1\n", [":8: key 'attention_gate': must be true or false, got 1"]),
    (BASE + "attention: mla\n" + MLA + "rotary_fraction: 0.5\n",
     [":10: key 'rotary_fraction': applies only to position: rope, with attention other than mla"]),
    (BASE + "attention: mla\n" + MLA.replace("v_head_dim: 4}", "v_head_dim: 4, q_lora: 8}"),
     [":9: key 'mla.q_lora': unknown key (did you mean 'q_lora_rank'?)"]),
    (BASE + "attention: mla\n" + MLA.replace("kv_lora_rank: 8, ", ""),
     [":9: key 'mla.kv_lora_rank': missing required key"]),
    (BASE + "attention: mla\n" + MLA.replace("kv_lora_rank: 8", "kv_lora_rank: 0"),
     [":9: key 'mla.kv_lora_rank': must be >= 1, got 0"]),
    (BASE + "attention: mla\n" + MLA.replace("}", ", q_lora_rank: 1.5}"),
     [":9: key 'mla.q_lora_rank': must be an integer, got 1.5"]),
    (BASE + "position: rope\nattention: mla\n" + MLA.replace("qk_rope_head_dim: 2", "qk_rope_head_dim: 3"),
     [":10: key 'mla.qk_rope_head_dim': RoPE needs an even size, got 3"]),
    # keys that would change nothing where they are given (issue 24's silently ignored ones)
    (BASE + "mlp_bias: true\nmoe: {num_experts: 2, experts_per_token: 1}\n",
     [":8: key 'mlp_bias': applies only to dense MLP layers"]),
    (BASE + "parallel_norms: 2\n", [":8: key 'parallel_norms': applies only to parallel_block: true; delete it"]),
    (BASE + "relative_buckets: 16\n", [":8: key 'relative_buckets': applies only to position: relative"]),
    (BASE + "rotary_fraction: 0.5\n", [":8: key 'rotary_fraction': applies only to position: rope"]),
    (BASE + "norm: rmsnorm\nnorm_bias: true\n", [":9: key 'norm_bias': applies only to norm: layernorm"]),
    (BASE + "rope_theta: 500000\n", [":8: key 'rope_theta': applies only to position: rope"]),
    # q/k norm, norms and their placement
    (BASE + "qk_norm: both\n", [":8: key 'qk_norm': unknown value 'both'", "expected one of: none, head, full"]),
    (BASE + "norm_weight: 0\n", [":8: key 'norm_weight': must be true or false, got 0"]),
    (BASE + "parallel_block: true\nnorm_placement: post_branch\n",
     [":9: key 'norm_placement': parallel_block works with 'pre' or 'sandwich', not 'post_branch'"]),
    # logit soft-capping, embedding scaling, sinks
    (BASE + "attn_logit_softcap: 0\n", [":8: key 'attn_logit_softcap': must be a positive number, got 0"]),
    (BASE + "final_logit_softcap: -30\n", [":8: key 'final_logit_softcap': must be a positive number, got -30"]),
    (BASE + "embedding_scale: yes\n", [":8: key 'embedding_scale': must be a positive number, got 'yes'"]),  # YAML 1.2
    (BASE + "attention_sinks: 1\n", [":8: key 'attention_sinks': must be true or false, got 1"]),
    # xIELU's learned scalars belong to a dense MLP of the language model
    (BASE + "activation: xielu\n" + MOE + "}\n",
     [":8: key 'activation': xielu learns scalars per dense MLP: not with moe"]),
    # mixed dense and MoE layers, shared experts
    (BASE + MOE + ", step: 3}\n", [":8: key 'moe': no layer is MoE (first_dense_layers 0, step 3, 2 layers)"]),
    (BASE + MOE + ", first_dense_layers: 2}\n",
     [":8: key 'moe': no layer is MoE (first_dense_layers 2, step 1, 2 layers)"]),
    (BASE + MOE + ", step: 2, first_dense_layers: 2}\n", [":8: key 'moe': no layer is MoE"]),
    (BASE + MOE + ", step: 0}\n", [":8: key 'moe.step': must be >= 1, got 0"]),
    (BASE + MOE + ", first_dense_layers: -1}\n", [":8: key 'moe.first_dense_layers': must be >= 0, got -1"]),
    (BASE + MOE + ", shared_expert_gate: true}\n",
     [":8: key 'moe.shared_expert_gate': applies only to moe.shared_experts >= 1"]),
    (BASE + MOE + ", shared_experts: 1, shared_expert_d_ff: 0}\n",
     [":8: key 'moe.shared_expert_d_ff': must be >= 1, got 0"]),
    (BASE + MOE + ", router_bias: maybe}\n", [":8: key 'moe.router_bias': must be true or false, got 'maybe'"]),
    (BASE + MOE + ", expert_bias: null}\n", [":8: key 'moe.expert_bias': must be true or false, got None"]),
    # Gemma 4's experts beside the MLP: in a sequential pre or sandwich block
    (BASE + "norm_placement: post\n" + MOE + ", beside_mlp: true}\n",
     [":9: key 'moe.beside_mlp': is modeled in a sequential block with norm_placement pre or sandwich"]),
    (BASE + MOE + ", shared_expert: 1}\n",
     [":8: key 'moe.shared_expert': unknown key (did you mean 'shared_experts'?)"]),
    (BASE + "moe:\n  num_experts: 4\n  experts_per_token: 0\n", [":10: key 'moe.experts_per_token': must be >= 1"]),
    (BASE + MOE + ", shared_expert_d_ff: 32}\n",
     [":8: key 'moe.shared_expert_d_ff': applies only to moe.shared_experts >= 1"]),
    (BASE + "sliding_window: 4\nlayer_types: [full, full]\n",
     [":8: key 'sliding_window': applies only to sliding layers"]),
    # RG-LRU gate blocks of one channel (torch's batched matmul may copy such an input, by layout)
    (BASE + "layer_types: [rglru]\nrglru: {width: 2, n_heads: 2}\n",
     [":9: key 'rglru.n_heads': 2 makes gate blocks of one channel (width 2), which are not modeled"]),
    # Mamba-1 heads (Zamba v1's): whole heads of the mixer's width, and without the one-head mixer norms
    (BASE + "layer_types: [mamba]\nmamba: {expand: 2, heads: 3}\n",
     [":9: key 'mamba.heads': must divide the mixer's width expand * d_model (128), got 3"]),
    (BASE + "layer_types: [mamba]\nmamba: {heads: 2, mixer_norms: weighted}\n",
     [":9: key 'mamba.heads': 2 heads with mixer_norms are not modeled"]),
])
def test_new_keys_bad_config_exits_2_with_one_line(config_file, run, text, fragments):
    path = config_file(text, "bad.yaml")
    result = run("params", path)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"Error: {path}:")
    for fragment in fragments:
        assert fragment in result.stderr


@pytest.mark.parametrize("text", [
    BASE + "sliding_window: 8\nlayer_types: [sliding, full]\n",
    BASE + "layer_types: [full]\n",
    BASE + "position: rope\nrope_layers: [true, true, true, false]\n",
    BASE + "position: rope\nrotary_fraction: 0.25\n",
    BASE + "attention: mla\n" + MLA,
    BASE + "attention: mla\n" + MLA.replace("}", ", q_lora_rank: null}"),
    BASE + "position: rope\nattention: mla\n" + MLA.replace("}", ", q_lora_rank: 6}"),
    BASE + "attention: mha\nqk_norm: full\nnorm_placement: post_branch\nnorm_weight: false\nnorm_bias: false\n",
    BASE + "attention_sinks: true\nattn_logit_softcap: 50\nfinal_logit_softcap: 30.0\nembedding_scale: 8\n",
    BASE + MOE + ", step: 2, first_dense_layers: 1, shared_experts: 1, shared_expert_d_ff: 16, "
                 "shared_expert_gate: true, router_bias: true, expert_bias: true}\n",
])
def test_new_keys_valid(config_file, run, text):
    path = config_file(text)
    result = run("params", path, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["total"] > 0


def test_qk_norm_booleans_mean_head_and_none():
    raw = dict(name="t", vocab_size=10, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=8)
    assert [from_dict({**raw, "qk_norm": v}).qk_norm for v in (True, False, "head", "full", "none")] == \
        ["head", "none", "head", "full", "none"]


# -- the hypothesis strategy covers every key and every value ----------------------------------

ENUM_CHOICES = {"activation": tuple(ACTIVATIONS), "norm": tuple(NORMS), "norm_placement": NORM_PLACEMENTS,
                "position": tuple(POSITIONS), "attention": ATTENTION_KINDS,
                "dtype": (*DTYPE_BITS, *WEIGHT_FORMATS), "quant_skip": tuple(QUANT_SKIPS),
                "qk_norm": (*QK_NORMS, True, False), "layer_types": LAYER_TYPES, "parallel_mixer": PARALLEL_MIXERS,
                "recurrent_norm_placement": NORM_PLACEMENTS}
VISION_ENUMS = {"activation": VISION_ACTIVATIONS, "norm": tuple(NORMS), "position": VISION_POSITIONS,
                "norm_placement": VISION_NORM_PLACEMENTS}
MIXER_ENUMS = {"mamba": {"mixer_norms": MIXER_NORMS}}  # a nested mixer key with a choice of values


def mixer_schema(kind: str):
    """The nested schema of a recurrent mixer kind, in its module (``keys.nested``)."""
    field = next(f for f in dataclasses.fields(ModelConfig) if f.name == kind)
    module = importlib.import_module(f"llmcalc.analysis.model.{kind}")
    return getattr(module, field.type.split(" | ")[0])


def _drawn_configs(n=1000):
    drawn = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(valid_configs())
    def collect(raw):
        drawn.append(raw)

    collect()
    return drawn


@pytest.mark.slow
def test_strategy_covers_every_key_and_value():
    """A new ModelConfig, MoEConfig or MLAConfig field fails here until valid_configs() draws it:
    every key is drawn and left at its default, every bool both ways, every enum value, and each
    optional value both set and unset."""
    drawn = _drawn_configs()
    free_text = {"name", "description"}
    enum_fields = {f.name for f in dataclasses.fields(ModelConfig) if f.type.startswith(("str", "tuple[str"))}
    assert enum_fields - free_text == set(ENUM_CHOICES), "a new enum key: add its choices to ENUM_CHOICES"
    visions = [raw["vision"] for raw in drawn if isinstance(raw.get("vision"), dict)]
    for cls, maps, enums in ((ModelConfig, drawn, ENUM_CHOICES),
                             (MoEConfig, [raw.get("moe") for raw in drawn], ENUM_CHOICES),
                             (MLAConfig, [raw.get("mla") for raw in drawn], ENUM_CHOICES),
                             (VisionConfig, visions, VISION_ENUMS),
                             (ProjectorConfig, [v["projector"] for v in visions], {"norm": ("none", *NORMS)}),
                             (HyperConfig, [raw.get("hyper") for raw in drawn], {}),
                             (Gemma3nConfig, [raw.get("gemma3n") for raw in drawn], {}),
                             (DSAConfig, [raw.get("dsa") for raw in drawn], {}),
                             (SharedTransformerConfig, [raw.get("shared_transformer") for raw in drawn], {}),
                             *((mixer_schema(kind), [raw.get(kind) for raw in drawn], MIXER_ENUMS.get(kind, {}))
                               for kind in MIXERS)):
        key = cls.__name__
        maps = [m for m in maps if isinstance(m, dict)]
        assert maps, f"valid_configs() never draws a '{key}' mapping"
        for f in dataclasses.fields(cls):
            where = f"{cls.__name__}.{f.name}"
            values = [m[f.name] for m in maps if f.name in m]
            assert values, f"valid_configs() never draws {where}"
            if f.default is not dataclasses.MISSING:
                assert len(values) < len(maps), f"valid_configs() never leaves {where} at its default"
            if "bool" in f.type:
                flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
                assert {True, False} <= set(flat), f"{where}: not both true and false"
            if f.name in enums:
                flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
                missing = [c for c in enums[f.name] if not any(c == v and type(c) is type(v) for v in flat)]
                assert not missing, f"{where}: never draws {missing}"
            if "None" in f.type:
                assert any(v is not None for v in values), f"{where}: never given a value"
            if f.type.startswith("float"):
                assert any(v != f.default for v in values), f"{where}: only its default"
    # the combinations the layer plan exists for
    cfgs = [from_dict(raw) for raw in drawn]
    assert any(len(set(c.layer_types or ())) == 2 for c in cfgs), "no mix of sliding and full layers"
    assert any(c.rope_layers and len(set(c.rope_layers)) == 2 and c.position == "rope" for c in cfgs)
    assert any(c.moe and c.moe.first_dense_layers and any(c.moe.is_moe_layer(i) for i in range(c.n_layers))
               for c in cfgs), "no first dense layers"
    assert any(c.moe and c.moe.step > 1 for c in cfgs), "no MoE step"
    assert any(c.moe and c.moe.shared_expert_gate for c in cfgs)
    assert any(c.mla and c.mla.q_lora_rank for c in cfgs) and any(c.mla and not c.mla.q_lora_rank for c in cfgs)
    assert any(c.position == "rope" and c.rotary_dims < c.head_size for c in cfgs if c.attention == "mha")
    assert any(c.position == "rope" and c.attention == "mla" for c in cfgs)


def test_hf_qwen_window_from_max_window_layers(tmp_path, run):
    """transformers' Qwen2 slides layers i >= max_window_layers: 28 full, then 4 sliding."""
    path = tmp_path / "config.json"
    path.write_text(MIXTRAL_JSON.replace('"mixtral"', '"qwen2"').replace(
        'null', '4096, "use_sliding_window": true, "max_window_layers": 28'))
    groups = json.loads(run("kvcache", path, "--seq", "8192", "--json").stdout)["layer_groups"]
    assert [(g["spec"]["window"], g["layers"], g["cached_tokens"]) for g in groups] == [
        (None, list(range(28)), 8192), (4096, [28, 29, 30, 31], 4096)]


# -- every key applies or is refused ----------------------------------------------------------------

# the variants, and configs that give the keys none of them gives
KEYED = {**VARIANTS, "full-layers": {"layer_types": ["full"]}, "fp8-channel": {"dtype": "fp8-channel"},
         "gptq": {"dtype": "gptq-int4", "quant_group_size": 16, "quant_skip": ["lm_head"]}}
KEYED_CONFIGS = {name: from_dict({**BASE_DICT, **raw}) for name, raw in KEYED.items()}


def _given_value(key: str):
    """A valid value of ``key`` from a config that gives it (``moe.step``: inside its moe mapping)."""
    top, _, inner = key.partition(".")
    for raw in KEYED.values():
        if top in raw and (not inner or inner in raw[top]):
            return raw[top] if not inner else raw[top][inner]
    raise AssertionError(f"no variant gives {key}")


@pytest.mark.parametrize("key", sorted(APPLIES))
def test_a_key_given_where_it_applies_to_nothing_is_refused(key):
    """For each conditional key: every variant that gives it satisfies its condition, and adding it
    to every variant that does not is a ConfigError naming the key (so a wrong condition, or a rule
    from_dict does not enforce, fails here)."""
    applies, _ = APPLIES[key]
    value, top, _, inner = _given_value(key), *key.partition(".")
    refused = 0
    for name, raw in KEYED.items():
        full = {**BASE_DICT, **raw}
        if top in raw and (not inner or inner in raw[top]):
            assert applies(KEYED_CONFIGS[name]), (name, key)
            continue
        if applies(KEYED_CONFIGS[name]) or (inner and not raw.get(top)):
            continue
        given = {**full, top: {**raw[top], inner: value}} if inner else {**full, key: value}
        with pytest.raises(ConfigError, match=f"key '{key}': applies only to "):
            from_dict(given)
        refused += 1
    assert refused, f"no variant shows {key} refused"


# -- the Python API checks what it is given ---------------------------------------------------------

def test_replace_checks_the_copy():
    cfg = load_bundled("gpt2-small")
    with pytest.raises(ConfigError, match=r"key 'd_model': must be >= 1, got -768"):
        cfg.replace(d_model=-768)
    with pytest.raises(ConfigError, match=r"key 'n_layer': unknown key \(did you mean 'n_layers'\?\)"):
        cfg.replace(n_layer=3)
    with pytest.raises(ConfigError, match=r"key 'n_kv_heads': must divide n_heads \(12\), got 5"):
        cfg.replace(n_kv_heads=5)
    assert cfg.replace(n_layers=3, layer_types=("full",)).n_layers == 3  # tuples as a file's lists


@pytest.mark.parametrize("call, field", [
    (lambda cfg: count_params("gpt2-small"), "cfg"),
    (lambda cfg: count_params({}), "cfg"),
    (lambda cfg: count_flops(cfg, "train"), "run"),
    (lambda cfg: kv_cache(cfg, None), "run"),
    (lambda cfg: activation_bytes(cfg, RunSpec), "run"),
    (lambda cfg: memory(cfg, {"mode": "train"}), "run"),
    (lambda cfg: RunSpec(causal="false"), "causal"),
    (lambda cfg: RunSpec(seq=2**60), "seq"),
    (lambda cfg: layer_plan(None), "cfg"),
    (lambda cfg: build(None), "cfg"),
    (lambda cfg: RunSpec().resolve(None), "cfg"),
    (lambda cfg: Layout.of(global_batch=8, batch=0), "batch"),  # before dividing by it
    (lambda cfg: Layout.of(global_batch=8, dp=0), "layout.dp"),
    (lambda cfg: Layout(tp=2, sp="no"), "layout.sp"),
    (lambda cfg: Layout(tp=2, sp=True, async_tp=1), "layout.async_tp"),
    (lambda cfg: RunSpec(seq=8, text=4), "text"),  # resolve's, beside images
    (lambda cfg: count_flops(cfg, RunSpec(seq=8, lora=LoRA(8, ("attention/zz",)))), "lora.targets"),
    (lambda cfg: activation_bytes(cfg, RunSpec(seq=8, lora=LoRA(8, ("attention/zz",)))), "lora.targets"),
])
def test_the_api_refuses_arguments_of_the_wrong_kind(call, field):
    with pytest.raises(SpecError) as caught:
        call(load_bundled("gpt2-small"))
    assert caught.value.field == field


def test_a_run_keeps_its_images_tokens():
    """``text`` is resolve's: given beside images, it must leave seq their tokens (Gemma 3's 256 an image)."""
    cfg = load_bundled("gemma-3-27b-it")
    resolved = RunSpec("prefill", 8, images=1).resolve(cfg)
    assert (resolved.seq, resolved.text, resolved.resolve(cfg).seq) == (264, 8, 264)
    with pytest.raises(SpecError) as caught:
        RunSpec("prefill", 8, images=1, text=4).resolve(cfg)  # 4 + 256 is not 8
    assert caught.value.field == "text"


def test_a_count_is_the_callers_own():
    """Changing a result's dicts leaves the next call's count whole."""
    cfg = load_bundled("gpt2-small")
    count_params(cfg).components.pop("mlp/up")
    again = count_params(cfg)
    assert sum(again.components.values()) == again.total == 124_439_808


def test_load_model_refuses_what_is_not_a_name_or_path():
    with pytest.raises(ConfigError, match="a model is a bundled name or a path, got 123"):
        load_model(123)
