"""Generated hostile input (issue 24): the classes of bad input found by fuzzing, drawn by
hypothesis so they stay fixed. Every command line ends in one of two ways: an answer (exit 0,
nothing on stderr but warnings), or exit 2 with one short printable line, ``Error: ...``. Where the
input has one right reading, the answer is checked against it: YAML 1.2's integers, the suffixes
of a count, a size in bits refused. The hand-picked cases live in test_bad_inputs.py."""

import json
import os
import re
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmcalc import ConfigError, Layout, LoRA, RunSpec, SpecError, count_flops, count_params, kv_cache, load_model
from llmcalc.analysis.load.catalog import MODEL_DIR
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.model.rules import APPLIES
from tests.console import error_line, llmcalc
from tests.strategies import valid_configs

pytestmark = pytest.mark.unit
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", 60))  # per test; a longer hunt: FUZZ_EXAMPLES=1500
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
BASE = "name: t\nvocab_size: 1000\ncontext_length: 64\nd_model: 64\nn_layers: 2\nn_heads: 4\nd_ff: 256\n"
HF_DIR = MODEL_DIR / "hf"
# what JSON, YAML or a user puts where a value belongs
JUNK = st.sampled_from([None, {}, [], False, True, "", "x", "12", -1, 0, 1.5, 10**40, float("inf"), [None], {"a": 1}])


def outcome(result) -> str:
    """``'answer'`` or ``'refused'``; anything else (a traceback, two lines, exit 1) fails the test."""
    lines = result.stderr.splitlines()
    if result.exit_code == 0:
        assert result.stdout and all(line.startswith("Warning: ") for line in lines), result.stderr
        return "answer"
    line = error_line(result).rstrip("\n")
    assert all(unicodedata.category(c) not in ("Cc", "Cf", "Cs") for c in line), ascii(line)  # escaped
    return "refused"


# -- numbers: sizes and counts in the options --------------------------------------------------------

DIGITS = st.text("0123456789", min_size=1, max_size=60)
EXPONENTS = st.one_of(st.just(""), st.builds(lambda s, d: f"e{s}{d}", st.sampled_from(["", "+", "-"]),
                                              st.text("0123456789", min_size=1, max_size=12)))
SIZE_UNITS = ["B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "b", "Mb", "Gb", "gb", "mb", "G", "M",
              "k", "GiB/s", "", "bytes", "Gib"]
SIZE_TEXT = st.one_of(
    st.builds(lambda d, f, e, sp, u: d + f + e + sp + u, DIGITS, st.sampled_from(["", ".", ".5", ".25"]),
              EXPONENTS, st.sampled_from(["", " "]), st.sampled_from(SIZE_UNITS)),
    st.text("0123456789.eE+-_, kMGTiBb/s", max_size=30))


@given(SIZE_TEXT, st.sampled_from(["kvcache", "memory"]))
@FUZZ
def test_a_budget_is_bytes_or_refused(text, command):
    result = llmcalc(command, "mistral-7b", "--budget", text, "--json")
    read = outcome(result)
    unit = re.sub(r"^[0-9.eE+\- ]*", "", text)
    if unit[-1:] == "b" and unit[:-1] in ("", "k", "K", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"):
        assert read == "refused", f"{text!r} is in bits, read as bytes"
    if not re.search(r"[A-Za-z]", text):
        assert read == "refused", f"{text!r} has no unit"


COUNT_TEXT = st.one_of(st.builds(lambda s, d, k: s + d + k, st.sampled_from(["", "+", "-"]),
                                 st.text("0123456789", min_size=1, max_size=45), st.sampled_from(["", "k", "K", "M"])),
                       st.text("0123456789kKMGe.,_+- ", max_size=20))


def count_of(text: str):
    """A count as the docs define it, or None: digits with an optional ``k``/``K`` (2^10) or ``M`` (2^20)."""
    m = re.fullmatch(r"\s*\+?([0-9]+)([kKM]?)\s*", text)
    return int(m.group(1)) * {"": 1, "k": 2**10, "K": 2**10, "M": 2**20}[m.group(2)] if m else None


@given(COUNT_TEXT)
@FUZZ
def test_a_count_means_the_same_in_every_option(text):
    """``128k`` is 131,072 and ``1M`` 1,048,576 tokens, in --seq as in --batch; a comma sweeps."""
    expected = [count_of(item) for item in text.split(",")]
    for option, command, key in (("--seq", "flops", "seq_len"), ("--batch", "kvcache", "batch")):
        result = llmcalc(command, "gpt2-small", option, text, "--json")
        if outcome(result) == "answer":
            rows = json.loads(result.stdout)
            assert [row[key] for row in (rows if isinstance(rows, list) else [rows])] == expected, text
        else:
            assert not all(n is not None and 1 <= n <= 2**53 for n in expected), text


@given(st.sampled_from(["--tp", "--pp", "--dp", "--chunk", "--new", "--lora-rank", "--global-batch"]),
       st.integers(0, 5000))
@FUZZ
def test_long_numbers_in_any_option_are_one_line(option, digits):
    mode = {"--chunk": "prefill", "--new": "generate"}.get(option, "train")
    command = "time" if option in ("--new", "--global-batch") else "memory"
    args = [command, "mistral-7b", "--mode", mode, option, "9" * digits or "0"]
    outcome(llmcalc(*args, *(["--hardware", "h100"] if command == "time" else [])))


# -- YAML read as YAML 1.2 ---------------------------------------------------------------------------

INTEGER_TEXT = st.one_of(
    st.builds(lambda z, d: z + d, st.sampled_from(["", "0", "00", "+", "-"]), st.text("0123456789", min_size=1,
                                                                                       max_size=4)),
    st.builds(lambda p, d: p + d, st.sampled_from(["0o", "0x", "0b", "0O", "0X"]), st.text("0123456789abcdef",
                                                                                           min_size=1, max_size=4)),
    st.text("0123456789:_.,+-xobe", min_size=1, max_size=8))


def yaml12_int(text: str):
    """An integer as the YAML 1.2 core schema reads it, or None for what is not one."""
    for pattern, base in ((r"[-+]?[0-9]+", 10), (r"0o[0-7]+", 8), (r"0x[0-9a-fA-F]+", 16)):
        if re.fullmatch(pattern, text):
            return int(text[2:] if base != 10 else text, base)
    return None


@given(INTEGER_TEXT)
@FUZZ
def test_yaml_integers_are_read_as_yaml_1_2(tmp_path_factory, text):
    """No octal ``012`` (that is 12), no base 60 ``1:00``, no ``1_000``: what YAML 1.2 reads."""
    path = tmp_path_factory.mktemp("yaml") / "model.yaml"
    path.write_text(BASE.replace("n_layers: 2", f"n_layers: {text}"))
    result = llmcalc("params", path, "--json")
    expected = yaml12_int(text)
    if outcome(result) == "answer":
        assert expected is not None and expected >= 1
        assert json.loads(result.stdout)["n_layers"] == expected
    else:
        assert expected is None or expected < 1 or expected > 100_000 or "n_layers" in result.stderr


@given(st.sampled_from(["<<: {d_ff: 512}\n", "moe: {<<: {num_experts: 4}}\n", "x: &a {d_ff: 1}\n<<: *a\n"]))
@FUZZ
def test_merge_keys_are_refused(tmp_path_factory, merge):
    path = tmp_path_factory.mktemp("yaml") / "model.yaml"
    path.write_text(BASE + merge)
    assert outcome(llmcalc("params", path)) == "refused"


# -- every key applies or is refused --------------------------------------------------------------

@given(valid_configs(), st.sampled_from(sorted(APPLIES)), st.sampled_from([1, 2, True, False, "x", [1], None]))
@FUZZ
def test_a_key_that_applies_to_nothing_is_refused(raw, key, value):
    """(A valid config gives only keys that apply: one that does not is not given.)"""
    section, _, name = key.partition(".")
    if APPLIES[key][0](from_dict(raw)) or (name and not isinstance(raw.get(section), dict)):
        return
    given_ = {**raw, section: {**raw[section], name: value}} if name else {**raw, key: value}
    with pytest.raises(ConfigError, match=f"key '{re.escape(key)}': "):  # its value refused first, or that it applies
        from_dict(given_)


# -- config.json: a key dropped, nulled or junk ----------------------------------------------------

def _paths(data: dict, prefix=()):
    for key, value in data.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _paths(value, (*prefix, key))


HF_FILES = sorted(HF_DIR.glob("*.json"))


@st.composite
def broken_hf(draw):
    path = draw(st.sampled_from(HF_FILES))
    data = json.loads(path.read_text())
    keys = draw(st.sampled_from(sorted(_paths(data))))
    parent = data
    for key in keys[:-1]:
        parent = parent[key]
    if draw(st.booleans()):
        del parent[keys[-1]]
    else:
        parent[keys[-1]] = draw(JUNK)
    return data


@given(broken_hf())
@FUZZ
def test_a_broken_config_json_is_read_or_refused(tmp_path_factory, data):
    """What transformers makes of it is test_hf.py's drop-and-null test; here, every command answers
    or says one line."""
    path = tmp_path_factory.mktemp("hf") / "config.json"
    path.write_text(json.dumps(data))
    for args in (("params",), ("kvcache", "--seq", "512"), ("memory", "--mode", "train", "--seq", "256")):
        outcome(llmcalc(args[0], path, *args[1:], "--json"))


# -- the Python API --------------------------------------------------------------------------------

RUN_FIELDS = ["mode", "seq", "batch", "attention", "causal", "recompute", "all_logits", "dtype", "weights_dtype",
              "kv_dtype", "chunk", "optimizer", "past", "logits", "layout", "lora", "grad_dtype"]


@given(st.sampled_from(RUN_FIELDS), JUNK)
@FUZZ
def test_a_run_spec_refuses_what_it_cannot_use(field, value):
    """Accepted values are used as given (no truthy ``'false'``); the rest raise a SpecError naming
    the field."""
    try:
        run = RunSpec(**{field: value})
    except SpecError as exc:
        assert exc.field.split(".")[0] == field
        return
    assert getattr(run, field) == value and type(getattr(run, field)) is type(value)
    cfg = load_model("gpt2-small")
    for compute in (count_flops, kv_cache):
        try:
            compute(cfg, run)
        except SpecError:
            pass


@given(st.sampled_from([count_params, count_flops, kv_cache, load_model]), JUNK)
@FUZZ
def test_the_api_refuses_what_is_not_a_config(function, value):
    with pytest.raises((SpecError, ConfigError)):
        function(value)


@given(st.sampled_from(["d_model", "n_layers", "n_heads", "vocab_size", "d_ff", "activation", "tie_embeddings",
                        "dtype", "sliding_window", "moe"]), JUNK)
@FUZZ
def test_replace_checks_the_copy(key, value):
    cfg = load_model("mistral-7b")
    try:
        copy = cfg.replace(**{key: value})
    except ConfigError:
        return
    assert count_params(copy).total > 0


@given(st.sampled_from(["tp", "pp", "dp", "ep", "cp", "zero", "sp"]), JUNK)
@FUZZ
def test_a_layout_and_lora_refuse_junk(field, value):
    for make in (lambda: Layout(**{field: value}), lambda: LoRA(rank=value)):
        try:
            make()
        except SpecError:
            pass


# -- one line: held warnings, echoed names ---------------------------------------------------------

WARNING_OPTIONS = [("--mode", "train", "--kv-dtype", "fp8"), ("--mode", "decode", "--recompute", "full"),
                   ("--seq", "2048")]  # gpt2-small: past its context of 1,024
BAD_OPTIONS = [("--tp", "5"), ("--dtype", "fp7"), ("--seq", "0"), ("--batch", "1e3"), ("--pp", "13"),
               ("--lora-rank", "-1")]  # gpt2-small: 12 heads and 12 layers


@given(st.sampled_from(WARNING_OPTIONS), st.sampled_from(BAD_OPTIONS), st.sampled_from(["memory", "flops", "time"]))
@FUZZ
def test_no_warning_before_an_error(warning, bad, command):
    """A warning about one option is not said when the command then fails on another."""
    hardware = ["--hardware", "h100"] if command == "time" else []
    assert outcome(llmcalc(command, "gpt2-small", *warning, *bad, *hardware)) == "refused"


@given(st.text(st.characters(codec="utf-8"), min_size=1, max_size=40))
@FUZZ
def test_names_are_echoed_printable(name):
    """Escape sequences and bidirectional controls in a name never reach the terminal raw."""
    outcome(llmcalc("params", name))
    outcome(llmcalc("params", "gpt2-small", "--dtype", name))
