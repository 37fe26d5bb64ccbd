"""Hostile and broken input (issue 10): every case exits 2 with one short line on stderr,
``Error: ...``, and no traceback, hang or silently wrong number. Process-level cases (a broken
pipe, closed streams, stdout encodings) run the real console entry point in a subprocess. The
generated cases, drawn by hypothesis over the same classes, are in test_fuzz.py."""

import json
import os
import signal
import subprocess
import sys

import pytest
import yaml

from llmcalc.analysis.errors import SHORT, brief, key_line, shorten
from llmcalc.analysis.load.catalog import HARDWARE_DIR, MODEL_DIR
from llmcalc.analysis.load.files import (
    MAX_FILE_BYTES,
    MAX_VALUES,
    _LibYAMLLoader,
    _PyLoader,
    _read,
    read_yaml,
)
from tests.console import error_line

BASE = "name: t\nvocab_size: 1000\ncontext_length: 64\nd_model: 64\nn_layers: 2\nn_heads: 4\nd_ff: 256\n"
LLAMA = dict(model_type="llama", vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=128)
MAIN = "import sys; from llmcalc.cli.__main__ import main; sys.argv = ['llmcalc', *sys.argv[1:]]; main()"


def llmcalc(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """The console script's ``main`` in a fresh process (a timeout: a hang fails, not blocks)."""
    return subprocess.run([sys.executable, "-c", MAIN, *args], **{"capture_output": True, "timeout": 120, **kwargs})


# -- the message itself --------------------------------------------------------------------------

@pytest.mark.unit
def test_shorten_keeps_both_ends_and_escapes_control_characters():
    assert shorten("a" * 50 + "b" * 50, 21) == "a" * 9 + "..." + "b" * 9
    assert shorten("line\nbreak\udcff") == "line\\nbreak\\udcff"
    assert shorten("short") == "short"
    assert len(shorten("x\n" * 10**6)) == SHORT


@pytest.mark.unit
def test_brief_is_bounded_for_huge_values():
    shared = ["lol"] * 9
    for _ in range(8):  # 9^9 leaves, as a YAML alias bomb builds them: repr() would never end
        shared = [shared] * 9
    shown = brief(shared)
    assert shown.startswith("[[[[...], [...], [...]") and shown.endswith("...], ...]") and len(shown) <= SHORT
    assert brief("x" * 10**6) == "'" + "x" * 37 + "..." + "x" * 38 + "'"
    assert (brief(6.5), brief("64"), brief(None), brief(["x"])) == ("6.5", "'64'", "None", "['x']")


@pytest.mark.unit
@pytest.mark.parametrize("text, message", [
    (BASE + "k" * 1000 + ": 1\n", f":8: key '{'k' * 37}...{'k' * 38}': unknown key\n"),
    (BASE.replace("name: t", "name: [" + ", ".join(["1"] * 5000) + "]"),
     ":1: key 'name': must be a non-empty string, got [1, 1, 1, 1, 1, 1, ...]\n"),
    (BASE + "activation: " + "x" * 10_000 + "\n", ":8: key 'activation': unknown value 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                                  "xxxxxx...xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'; expected one of: "
                                                  "relu, gelu, silu, sqrelu, swiglu, geglu, reglu, sqreglu, xielu\n"),
])
def test_echoed_values_are_capped(config_file, run, text, message):
    path = config_file(text)
    assert error_line(run("params", path)) == f"Error: {path}{message}"


@pytest.mark.unit
def test_long_paths_are_capped_and_the_os_error_named(run, tmp_path):
    path = tmp_path / ("a" * 300 + ".yaml")  # past NAME_MAX: open() fails with ENAMETOOLONG
    line = error_line(run("params", path))
    assert line.endswith("a.yaml: cannot read file: File name too long\n") and "..." in line


@pytest.mark.unit
def test_unknown_model_name_is_capped(run):
    line = error_line(run("params", "m" * 10_000))
    assert line == f"Error: unknown model '{'m' * 37}...{'m' * 38}' (`llmcalc models` lists them)\n"


# -- what a file is, and how much of it is read --------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("make, message", [
    (lambda tmp: "/dev/zero", "/dev/zero: not a regular file (a FIFO, device or socket is never read)"),
    (lambda tmp: tmp, "/config.json: no such file"),  # a directory is read as a model directory
    (lambda tmp: tmp / "model.yaml" / "x.yaml", "/x.yaml: cannot read file: Not a directory"),
])
def test_what_is_not_a_config_file(run, tmp_path, make, message):
    (tmp_path / "model.yaml").write_text(BASE)
    assert error_line(run("params", make(tmp_path))).endswith(f"{message}\n")


@pytest.mark.unit
def test_a_hardware_directory_is_named(run, tmp_path):
    """A directory given as --hardware (no hardware directory to look into, as a model's has config.json)."""
    line = error_line(run("time", "gpt2-small", "--hardware", tmp_path))
    assert line == f"Error: {tmp_path}: is a directory\n"


@pytest.mark.unit
def test_a_symlink_loop(run, tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert error_line(run("params", loop)) == f"Error: {loop}: cannot read file: Too many levels of symbolic links\n"


@pytest.mark.unit
def test_a_file_past_the_cap_is_not_read(run, tmp_path):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as f:
        f.truncate(10 * 2**30)  # sparse: 10 GiB that take no disk
    message = f"larger than {MAX_FILE_BYTES:,} bytes, so not a model config (those are a few KB)"
    assert error_line(run("params", path)) == f"Error: {path}: {message}\n"


@pytest.mark.unit
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "model.yaml"
    os.mkfifo(fifo)
    proc = llmcalc("params", str(fifo), text=True)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"Error: {fifo}: not a regular file (a FIFO, device or socket is never read)\n"


# -- YAML and JSON structure ---------------------------------------------------------------------

def _alias_bomb(levels: int = 9) -> str:
    anchors = ['&a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    anchors += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "d_model: [" + ", ".join(anchors) + "]\n"


@pytest.mark.unit
@pytest.mark.parametrize("text, message", [
    (BASE.replace("d_model: 64\n", "") + _alias_bomb(),
     f":7: key 'd_model': more than {MAX_VALUES:,} values once YAML aliases are expanded"),
    (BASE + "layer_types: &l [*l]\n", ":8: key 'layer_types': a YAML alias refers to a node that contains it"),
    (BASE + "moe: " + "[" * 600 + "]" * 600 + "\n", ":8: nested deeper than 32 levels"),
    (BASE + "moe: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", ":8: nested deeper than 32 levels"),
    (BASE + "x: &x [1]\n" + "".join(f"x{i}: &x{i} [*x{'' if i == 0 else i - 1}]\n" for i in range(40)),
     "nested deeper than 32 levels once YAML aliases are expanded"),
    ("x: [" + ", ".join(["1"] * (MAX_VALUES + 1)) + "]\n",
     f":1: more than {MAX_VALUES:,} values, so not a model config"),
    (BASE.replace("d_model: 64", "d_model: " + "9" * 5000), ":4: key 'd_model': integer of 5,000 characters; "
                                                            "at most 100 digits are read"),
    (BASE.replace("d_model: 64", "d_model: " + ":".join(["59"] * 3000)),  # YAML 1.2: no base 60
     ":4: key 'd_model': must be an integer, got '59:59"),
    (BASE + "moe:\n  num_experts: 4\n  num_experts: 8\n  experts_per_token: 2\n",
     ":10: key 'moe.num_experts': duplicate key (first on line 9)"),
    (BASE + "attention: mla\nmla: {kv_lora_rank: 8, kv_lora_rank: 8}\n",
     ":9: key 'mla.kv_lora_rank': duplicate key (first on line 9)"),
])
@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pyyaml"])
def test_yaml_structure(config_file, run, text, message, libyaml, monkeypatch):
    assert yaml.__with_libyaml__  # CI's PyYAML wheel has it: both parsers are tested
    monkeypatch.setattr(yaml, "__with_libyaml__", libyaml)
    path = config_file(text)
    line = error_line(run("params", path))
    assert line.startswith(f"Error: {path}") and message in line


@pytest.mark.unit
def test_libyaml_and_pyyaml_read_every_bundled_file_alike():
    files = [*MODEL_DIR.glob("*.yaml"), *HARDWARE_DIR.glob("*.yaml")]
    assert len(files) > 30
    for path in files:
        text = path.read_text()
        assert _read(_LibYAMLLoader(text), "x") == _read(_PyLoader(text), "x"), path


@pytest.mark.unit
def test_each_key_reached_through_mappings_has_its_own_line():
    """Nested keys by dotted path; a list's items have no path (their list's line names them); a
    top-level key spelled with a dot keeps its own line."""
    text = "a:\n  b: 1\n  c:\n    d: 2\ne:\n  - f: 3\n  - f: 4\ng.h: 5\ng:\n  h: 6\n"
    lines = read_yaml(text, "x")[1]
    assert lines == {"a": 1, "a.b": 2, "a.c": 3, "a.c.d": 4, "e": 5, "g.h": 8, "g": 9}
    assert [key_line(lines, k) for k in ("a.c.d", "e.f", "a.c.x.y", "z")] == [4, 5, 3, None]


@pytest.mark.unit
@pytest.mark.parametrize("text, problem", [
    ("a: b: c\n", "mapping values are not allowed here"),
    ("a: [1, 2\n", "expected ',' or ']', but got '<stream end>'"),
    ("a: !!python/object:os.system x\n", "YAML tags that construct objects are not allowed"),
])
def test_a_yaml_error_is_worded_by_pyyaml_whichever_parser_runs(config_file, run, text, problem, monkeypatch):
    lines = set()
    for libyaml in (True, False):
        monkeypatch.setattr(yaml, "__with_libyaml__", libyaml)
        lines.add(error_line(run("params", config_file(text))))
    (line,) = lines
    assert problem in line


@pytest.mark.unit
@pytest.mark.parametrize("text, message", [
    ('{"name": "t", "name": "u"}', "key 'name': duplicate key"),
    ('{"model_type": "llama", "rope_parameters": {"rope_theta": 1, "rope_theta": 2}}',
     "key 'rope_theta': duplicate key"),
    ('{"model_type": "llama", "vocab_size": ' + "9" * 5000 + "}",
     "integer of 5,000 characters; at most 100 digits are read"),
    ('{"model_type": "llama", "x": ' + "[" * 600 + "]" * 600 + "}", "nested deeper than 32 levels"),
    ('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 32 levels"),
    ('{"hidden_size": 4096, "num_hidden_layers": 32}',
     "key 'model_type': missing: a Hugging Face config.json names its model_type, an llmcalc config its name"),
])
def test_json_structure(config_file, run, text, message):
    path = config_file(text, "config.json")
    assert error_line(run("params", path)) == f"Error: {path}: {message}\n"


@pytest.mark.unit
@pytest.mark.parametrize("text, message", [
    (BASE.replace("n_layers: 2", "n_layers: 100001"), ":5: key 'n_layers': must be at most 100,000, got 100001"),
    (BASE.replace("d_model: 64", f"d_model: {2**53 + 1}"),
     f":4: key 'd_model': must be at most 9,007,199,254,740,992, got {2**53 + 1}"),
])
def test_sizes_past_the_bounds(config_file, run, text, message):
    path = config_file(text)
    assert error_line(run("params", path)) == f"Error: {path}{message}\n"


# -- Hugging Face config.json values -------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("changes, message", [
    ({"tie_word_embeddings": "false"}, "key 'tie_word_embeddings': must be true or false, got 'false'"),
    ({"attention_bias": "true"}, "key 'attention_bias': must be true or false, got 'true'"),
    ({"mlp_bias": 0}, "key 'mlp_bias': must be true or false, got 0"),
    ({"hidden_act": ["silu"]}, "key 'hidden_act': unsupported activation ['silu']"),
    ({"hidden_act": {"name": "silu"}}, "key 'hidden_act': unsupported activation {'name': 'silu'}"),
    ({"torch_dtype": ["bfloat16"]}, "key 'torch_dtype': unsupported dtype ['bfloat16']"),
    ({"dtype": {"x": 1}}, "key 'dtype': unsupported dtype {'x': 1}"),
    ({"vocab_size": None}, "key 'vocab_size': is null, but a value is needed"),
    ({"hidden_size": "64"}, "key 'hidden_size': must be an integer from 1 to 9,007,199,254,740,992, got '64'"),
    ({"num_hidden_layers": 10**40}, "key 'num_hidden_layers': must be an integer from 1 to 100,000, got 1000"),
    ({"model_type": "gemma3_text", "num_hidden_layers": 10**12}, "key 'num_hidden_layers': must be an integer"),
    ({"model_type": "gemma3_text", "sliding_window_pattern": 0}, "key 'sliding_window_pattern': must be an integer"),
    ({"model_type": "gptj", "n_embd": 64, "n_head": 0, "n_layer": 2, "n_positions": 8},
     "key 'n_head': must be an integer from 1"),
    ({"model_type": "gptj", "n_embd": 64, "n_head": 5, "n_layer": 2, "n_positions": 8},
     "key 'n_head': must divide n_embd (64), got 5"),
    ({"model_type": "qwen2", "max_window_layers": "28"}, "key 'max_window_layers': must be an integer from 0"),
    ({"model_type": "qwen2_moe", "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "mlp_only_layers": 0}, "key 'mlp_only_layers': must be a list of layer indices, got 0"),
    ({"model_type": "smollm3", "no_rope_layers": ["1", "0"]}, "key 'no_rope_layers': must list one value per layer"),
    ({"model_type": "qwen2", "layer_types": [["full_attention"], "full_attention"]},
     "key 'layer_types': unsupported layer type ['full_attention']"),
    ({"text_config": {"quantization_config": {"quant_method": "fp8"}}},
     "key 'text_config.quantization_config': 'fp8': not supported inside a nested config"),
    ({"rope_parameters": {"rope_theta": 1e4, "quantization_config": {"bits": 4}}},
     "key 'rope_parameters.quantization_config': not supported inside a nested config"),
    ({"quantization_config": False}, "key 'quantization_config': must be a mapping, got False"),
])
def test_hf_values(config_file, run, changes, message):
    path = config_file(json.dumps({**LLAMA, **changes}), "config.json")
    line = error_line(run("params", path))
    assert line.startswith(f"Error: {path}: {message}"), line


# -- a model directory and a Hugging Face cache snapshot -----------------------------------------

@pytest.mark.unit
def test_model_directory_is_named_after_it(run, tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    assert json.loads(run("params", folder, "--json").stdout)["model"] == "my-model"


@pytest.mark.unit
def test_hf_snapshot_is_named_after_the_repository_not_the_commit(run, tmp_path):
    repo = tmp_path / "hub" / "models--mistralai--Mistral-7B-v0.1"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "2f4d3c").write_text(json.dumps({**LLAMA, "_name_or_path": "/scratch/ckpt-1000"}))
    snapshot = repo / "snapshots" / "26bca36bde8333b5d7f72e9ed20ccda6a618af24"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to("../../blobs/2f4d3c")  # how the hub cache stores files
    for spec in (snapshot, snapshot / "config.json"):
        data = json.loads(run("params", spec, "--json").stdout)
        # embedding and LM head 2 x 32,000 x 64; per layer q, k, v, o 4 x 64^2, gate, up, down
        # 3 x 64 x 128, two norms 2 x 64; the final norm 64
        assert (data["model"], data["total"]) == ("Mistral-7B-v0.1", 2 * 32_000 * 64 + 2 * 41_088 + 64)


# -- click's usage errors ------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("args, line", [
    (("params", "--bogus"), "Error: No such option: --bogus\n"),
    (("nosuchcommand",), "Error: No such command 'nosuchcommand'.\n"),
    (("kvcache", "gpt2-xl", "--budge", "1"), "Error: No such option: --budge (Possible options: --budget)\n"),
    (("plot", "flops", "--batch", "x"),
     "Error: Invalid value for '--batch': expects a whole number such as 4096 or 128k, got 'x'\n"),
    (("plot",), "Error: Missing argument 'KIND'. Choose from: flops, kvcache, memory, roofline\n"),
    (("verify", "gpt2-small", "--seq"), "Error: Option '--seq' requires an argument.\n"),
])
def test_click_usage_errors_are_one_line(run, args, line):
    assert error_line(run(*args)).startswith(line)


@pytest.mark.unit
@pytest.mark.parametrize("args, line", [
    (("memory", "gpt2-small", "--pp", "13"), "Error: --pp 13 must be at most the 12 layers of gpt2-small\n"),
    (("time", "gpt2-small", "--hardware", "h100", "--pp", "4", "--vpp", "4"),
     "Error: --vpp 4: 4 x 4 virtual stages need a layer each, and gpt2-small has 12\n"),
    (("memory", "gpt2-small", "--vpp", "2"),
     "Error: --vpp 2 (interleaved 1F1B) splits each pipeline stage into model chunks: it needs pp > 1\n"),
    (("time", "gpt2-small", "--hardware", "h100", "--pp", "3", "--vpp", "2", "--global-batch", "4"),
     "Error: --vpp 2 (interleaved 1F1B) needs the micro-batches per step (4) to be a multiple of pp (3), as "
     "Megatron-LM's schedule does\n"),
    (("memory", "gpt2-small", "--pp", "2", "--vpp", "0"), "Error: Invalid value for '--vpp': must be >= 1, got 0\n"),
])
def test_refused_pipelines_are_one_line(run, args, line):
    assert error_line(run(*args)) == line


@pytest.mark.unit
@pytest.mark.parametrize("args, line", [
    (("time", "llama-3-8b", "--hardware", "a100-80gb", "--dtype", "fp8"),
     "Error: --dtype fp8 (matmuls in fp8) needs an fp8 peak: a100-80gb lists none (it has fp32, tf32, bf16, fp16, "
     "int8)\n"),
    (("time", "llama-3-8b", "--hardware", "h100", "--dtype", "fp8", "--lora-rank", "8"),
     "Error: --dtype fp8 with LoRA adapters is not modeled (float8 training converts the base's linears, which LoRA "
     "freezes)\n"),
    (("time", "llama-3-8b", "--hardware", "h100", "--mode", "decode", "--dtype", "fp8", "--weights-dtype", "int4"),
     "Error: --dtype fp8 (matmuls in fp8) reads float or fp8 weights, got int4: give --weights-dtype bf16 or an fp8 "
     "format\n"),
    (("time", "llama-3-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "5", "--new", "9", "--tp", "2",
      "--pp", "2"), "Error: --pp 2: generate runs on one tensor-parallel group or on data-parallel GPUs, without "
                    "pipeline stages or context parallelism\n"),
    (("time", "llama-3-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "5", "--new", "9", "--tp", "2",
      "--dp", "2"), "Error: --dp 2 with --tp 2: generate runs on one tensor-parallel group (--tp, as gpt-fast does) or "
                    "on data-parallel GPUs whose experts --ep may deal out (--dp, as SGLang and vLLM serve MoE "
                    "models), not both\n"),
    (("time", "llama-3-8b", "--hardware", "h100", "--mode", "generate", "--prompt", "5", "--new", "9", "--tp", "3"),
     "Error: --tp 3 must divide the 32 attention heads of llama-3-8b\n"),
])
def test_fp8_and_generate_on_a_layout_refusals_are_one_line(run, args, line):
    assert error_line(run(*args)) == line


@pytest.mark.unit
@pytest.mark.parametrize("args, line", [
    (("memory", "llama-2-7b", "--lora-rank", "8", "--weights-dtype", "nf4", "--tp", "8"),  # 21.5 blocks of 64
     "Error: --tp 8 splits the 11,008 inputs of mlp/down into shards of 1,376, not a whole number of nf4's "
     "64-wide groups (vLLM refuses it)\n"),
    (("plan", "llama-2-7b", "--gpus", "2", "--hardware", "h100", "--global-batch", "8", "--lora-alpha", "8"),
     "Error: --lora-alpha and --lora-targets need --lora-rank\n"),
    (("plan", "gpt2-small", "--gpus", "2", "--hardware", "h100", "--global-batch", "8", "--lora-rank", "8",
      "--lora-targets", "moe/experts"), "Error: --lora-targets moe/experts: gpt2-small has no such linear"),
])
def test_refused_lora_layouts_are_one_line(run, args, line):
    """What stays refused once adapters run under layouts: a quantized base (QLoRA) on several GPUs."""
    assert error_line(run(*args)).startswith(line)


@pytest.mark.unit
def test_a_number_too_large_to_compute_with(run):
    """A 401-digit --seq (its FLOPs would pass a float's 1e308): refused at parsing, past 2^53,
    exit 2, no traceback."""
    result = run("flops", "gpt2-xl", "--seq", "1" + "0" * 400)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines()[-1].startswith("Error: ") and "Traceback" not in result.stderr


# -- verify: sizes torch cannot address, and deep models -----------------------------------------

@pytest.mark.reference
@pytest.mark.parametrize("args, message", [
    (("--seq", str(2**31)), "Error: gpt2-small: --seq 2,147,483,648 with --batch 2: a tensor of 1.11e+20 elements "
                            "would pass the 2^63 bytes torch can address\n"),
    (("--seq", "10", "--batch", str(2**53)), "Error: gpt2-small: --seq 10 with --batch 9,007,199,254,740,992"),
    (("--seq", str(2**53), "--against", "transformers"), "Error: gpt2-small: --seq 9,007,199,254,740,992 "),
])
def test_verify_past_what_torch_can_address(run, args, message):
    assert error_line(run("verify", "gpt2-small", "--device", "meta", *args)).startswith(message)


@pytest.mark.reference
def test_verify_window_past_what_torch_can_address(config_file, run):
    path = config_file(BASE + f"sliding_window: {2**53}\nlayer_types: [sliding]\n")
    line = error_line(run("verify", path, "--device", "meta"))
    assert line.startswith("Error: t: --seq 128 with --batch 2 and a prefill of 9,007,199,254,741,000 tokens: ")


@pytest.mark.reference
@pytest.mark.slow
def test_checks_run_on_a_stack_deep_enough_to_free_a_deep_graph():
    """torch frees an autograd graph recursively through nodes that have a Python object; a
    chain of them overflows the main thread's stack (a segfault, as a 2,000-layer model did in
    verify): here 25,000 on a main thread of 1 MiB (`ulimit -s 1024`), which overflows past
    10,000 as the default 8 MiB does past 50,000: the same chain then crashes on the main thread."""
    import resource

    def small_stack():
        resource.setrlimit(resource.RLIMIT_STACK, (1 << 20, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    code = ("import torch\nfrom llmcalc.analysis.verify.report import on_deep_stack\n"
            "def chain():\n"
            "    y = torch.zeros(1, requires_grad=True)\n"
            "    for _ in range(25_000):\n"
            "        y = y * 1\n"
            "        y.grad_fn\n"
            "    del y\n"
            "    return 'freed'\n"
            "print(on_deep_stack(chain), flush=True)\n"
            "chain()\n")  # then on the main thread
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          preexec_fn=small_stack)
    assert (proc.returncode, proc.stdout) == (-signal.SIGSEGV, "freed\n"), proc.stderr


@pytest.mark.reference
def test_checks_run_on_the_calling_thread_when_no_big_stack_can_start(monkeypatch):
    """A tight `ulimit -v` leaves no room for the 1 GiB stack: the checks still run, here."""
    import threading

    from llmcalc.analysis.verify.report import on_deep_stack

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert on_deep_stack(threading.get_ident) == threading.get_ident()


# -- hardware calibrate: refused before anything is measured -------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("out, line", [
    ("no-such-dir/my-gpu.yaml", "Error: --out: no such directory 'no-such-dir'\n"),
    ("my-gpu.txt", "Error: --out must end in .yaml or .yml (what --hardware reads), got 'my-gpu.txt'\n"),
    ("{tmp}", "Error: --out '{tmp}' names a directory; name the YAML file, such as my-gpu.yaml\n"),
])
def test_calibrate_bad_out_is_one_line(run, tmp_path, monkeypatch, out, line):
    monkeypatch.chdir(tmp_path)
    out, line = out.format(tmp=tmp_path), line.format(tmp=tmp_path)
    assert error_line(run("hardware", "calibrate", "--device", "cpu", "--out", out)) == line


@pytest.mark.unit
@pytest.mark.parametrize("args, line", [
    (("--device", "tpu"), "Error: Invalid value for '--device': 'tpu' is not one of 'cuda', 'cpu'.\n"),
    (("--device", "cpu", "--hardware", "nope"), "Error: unknown hardware 'nope' (`llmcalc hardware` lists them)\n"),
])
def test_calibrate_bad_options_are_one_line(run, args, line):
    assert error_line(run("hardware", "calibrate", *args)) == line


@pytest.mark.reference
def test_calibrate_without_cuda_is_one_line(run, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # on a machine with a GPU too
    assert error_line(run("hardware", "calibrate", "--device", "cuda")).startswith("Error: no CUDA device: ")


# -- the process: pipes, closed streams, encodings -----------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("args", [("params",), ("--help",)])  # llmcalc's output; typer's help, through rich
def test_broken_pipe_exits_141_quietly(args):
    proc = subprocess.Popen([sys.executable, "-c", MAIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader leaves before the first line, as `| head -c 0` does
    assert (proc.wait(timeout=120), proc.stderr.read()) == (141, b"")
    proc.stderr.close()


@pytest.mark.unit
def test_closed_stdout_is_a_usage_error():
    proc = llmcalc("params", "gpt2-xl", capture_output=False, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1),
                   text=True)
    assert (proc.returncode, proc.stderr) == (2, "Error: standard output is closed: nowhere to write the results\n")


@pytest.mark.unit
def test_closed_stderr_keeps_the_exit_code_and_stdout_clean():
    proc = subprocess.run([sys.executable, "-c", MAIN, "params", "no-such-model"], stdout=subprocess.PIPE,
                          preexec_fn=lambda: os.close(2), timeout=120)
    assert (proc.returncode, proc.stdout) == (2, b"")


@pytest.mark.unit
def test_a_full_disk_is_one_line():
    with open("/dev/full", "w") as full:
        proc = llmcalc("params", "gpt2-xl", stdout=full, capture_output=False, stderr=subprocess.PIPE, text=True)
    assert (proc.returncode, proc.stderr) == (2, "Error: No space left on device\n")


@pytest.mark.unit
def test_leaving_without_teardown_loses_nothing(run, tmp_path):
    """The console script leaves with os._exit when nothing needs the interpreter's teardown
    (cli/__main__.py): output of any length arrives whole through a pipe, an exit handler registered
    before the command still runs (the process exits normally), and so does a profiler's report."""
    piped = llmcalc("params", "--json", timeout=300)
    assert (piped.returncode, piped.stderr) == (0, b"")
    assert json.loads(piped.stdout) == json.loads(run("params", "--json").stdout)
    handler = "import atexit; atexit.register(print, 'exit handler ran'); " + MAIN
    proc = subprocess.run([sys.executable, "-c", handler, "params", "gpt2-small", "--json"], capture_output=True,
                          text=True, timeout=120)
    assert (proc.returncode, proc.stdout.endswith("}\nexit handler ran\n")) == (0, True), proc.stdout[-200:]
    script, report = tmp_path / "script.py", tmp_path / "profile.out"
    script.write_text(MAIN.replace("; ", "\n"))
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(report), str(script), "params", "gpt2-small"],
                          capture_output=True, timeout=120)
    assert (proc.returncode, report.exists()) == (0, True), proc.stderr


@pytest.mark.unit
@pytest.mark.parametrize("encoding, name, shown", [
    ("utf-8", "mod\\udcffle", b"mod\\udcffle"),  # a lone surrogate, from a JSON escape
    ("ascii", "mod\u00e8le", b"mod\\xe8le"),  # an ASCII terminal
])
def test_output_any_stdout_can_encode(tmp_path, encoding, name, shown):
    path = tmp_path / "model.json"
    path.write_text('{"name": "' + name + '", "vocab_size": 10, "context_length": 8, "d_model": 8, '
                    '"n_layers": 1, "n_heads": 1, "d_ff": 8}')
    proc = llmcalc("params", str(path), env={**os.environ, "PYTHONIOENCODING": encoding})
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout.startswith(shown + b": parameters")


@pytest.mark.unit
@pytest.mark.parametrize("name", ["red\x1b[31m", "two\nlines", "tab\there"])
def test_control_characters_in_a_name_are_refused(tmp_path, run, name):
    """From a YAML or a config.json's _name_or_path, a name reaches every table title and row."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "_name_or_path": name, "vocab_size": 100, "hidden_size": 64,
                                "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                                "max_position_embeddings": 128}))
    assert "key 'name': must be printable text (no control characters)" in error_line(run("params", path))
