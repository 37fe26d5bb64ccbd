"""Config validation through the CLI: exit code 2, one line on stderr naming file, key, line."""

import json
import subprocess
import sys

import pytest
from hypothesis import assume, given, settings, strategies as st

from tests.strategies import valid_configs

from llmcalc.analysis.config import ConfigError, from_dict
from llmcalc.analysis.params import count_params

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
    (BASE + "moe: {num_experts: 2}\n", ":8: key 'moe': missing required key 'experts_per_token'"),
    (BASE + "moe: {num_experts: 2, experts_per_token: 0}\n",
     ":8: key 'moe.experts_per_token': must be >= 1, got 0"),
    (BASE + "parallel_norms: 1.0\n", ":8: key 'parallel_norms': must be 1 or 2, got 1.0"),
    (BASE + "relative_buckets: 8\nrelative_max_distance: 4\n",
     ":9: key 'relative_max_distance': must exceed relative_buckets // 2 (4), got 4"),
    (BASE + "? [1, 2]\n: 3\n", ":8: not valid YAML: found unhashable key"),
    (BASE + "qkv_bias: yes please\n", ":8: key 'qkv_bias': must be true or false"),
    (BASE + "d_model: 128\n", ":8: key 'd_model': duplicate key (first on line 4)"),
    ("name: [1, 2\n", "not valid YAML"),
    ("- 1\n- 2\n", "expected a mapping of config keys, got list"),
    ("", "expected a mapping of config keys, got NoneType"),
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
            "from llmcalc.analysis.config import load_bundled; "
            "from llmcalc.analysis.params import count_params; "
            "[importlib.import_module('llmcalc.analysis.' + m.name) for m in pkgutil.iter_modules("
            "analysis.__path__) if m.name != 'verify']; "
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
    ('{"model_type": "llama", "vocab_size": 10}', "key 'max_position_embeddings': missing Hugging Face key"),
    (MIXTRAL_JSON.replace('"silu"', '"tanh"'), "key 'hidden_act': unsupported activation 'tanh'"),
    (MIXTRAL_JSON.replace('"mixtral"', '"qwen2"').replace('null', '4096, "use_sliding_window": true, '
                                                          '"max_window_layers": 28'),
     "key 'max_window_layers': a sliding window on only some layers is not supported"),
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


@settings(max_examples=200, deadline=None)
@given(valid_configs())
def test_random_valid_configs_count(raw):
    p = count_params(from_dict(raw, "random.yaml"))
    assert sum(p.components.values()) == p.total
    assert 0 < p.active <= p.total


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
    if key == "drop":
        del raw["d_ff"]
    else:
        raw[key] = value
    with pytest.raises(ConfigError):
        from_dict(raw, "random.yaml")
