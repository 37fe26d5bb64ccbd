"""Output formats (table, JSON, CSV, Markdown), sweeps over --seq and --batch, tables that never
cut a number in an 80-column terminal, and bad input that must exit 2 with one short line."""

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmcalc.cli.format import iec, layer_list, si

GPT2_SMALL = (Path(__file__).resolve().parent.parent / "model_configs" / "gpt2-small.yaml").read_text()


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def _at(record, path: str):
    """A JSON value by its CSV column name: ``forward.total`` is ``record["forward"]["total"]``."""
    for key in path.split("."):
        record = record[key]
    return record


def _same(cell: str, value) -> bool:
    if isinstance(value, bool):
        return cell == ("true" if value else "false")
    return cell == str(value)


# --- CSV carries the JSON's numbers --------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("args", [
    ["models"],
    ["params", "gpt2-small", "mixtral-8x7b"],
    ["params"],
    ["flops", "gpt2-small", "--seq", "128,256", "--batch", "1,3"],
    ["flops", "mixtral-8x7b", "gemma-2-9b", "--mode", "decode", "--seq", "4096", "--causal"],
    ["kvcache", "mistral-7b", "gemma-2-9b", "--seq", "1024,8192", "--budget", "80GiB"],
    ["kvcache", "mixtral-8x7b", "--seq", "1024", "--batch", "1,2", "--budget", "40GB"],
    ["memory", "gpt2-small", "mixtral-8x7b", "--mode", "inference", "--seq", "512"],
    ["memory", "gpt2-small", "--seq", "128", "--batch", "1,2", "--recompute", "full"],
    ["time", "gpt2-small", "mistral-7b", "--hardware", "h100", "--mode", "decode", "--seq", "512", "--batch", "1,8"],
    ["time", "gpt2-small", "--hardware", "l4", "--mode", "generate", "--prompt", "64", "--new", "4", "--batch", "1,2"],
])
def test_csv_rows_are_the_json_records(run, args):
    """Side-by-side output: one CSV row per model x workload, each column a JSON path."""
    data = json.loads(run(*args, "--json").stdout)
    result = run(*args, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    rows = _csv(result.stdout)
    assert len(rows) == len(data) > 1
    for row, record in zip(rows, data):
        assert all(row.values()), row  # every column is present in every record
        for path, cell in row.items():
            assert _same(cell, _at(record, path)), (path, cell)


@pytest.mark.unit
def test_hardware_csv_has_every_figure_of_the_json(run):
    """A row per accelerator with every figure of its JSON record (the peaks, the links), in one set of columns:
    a figure a card lacks (the A100's fp8 peak) is a blank cell."""
    data = json.loads(run("hardware", "--json").stdout)
    rows = _csv(run("hardware", "--format", "csv").stdout)
    assert [row["name"] for row in rows] == [record["name"] for record in data]
    for row, record in zip(rows, data):
        for key, value in record.items():
            for path, leaf in ([(f"{key}.{k}", v) for k, v in value.items()] if isinstance(value, dict)
                               else [(key, value)]):
                assert row[path] == ("" if leaf is None else str(leaf)), (record["name"], path)


@pytest.mark.unit
def test_plan_csv_rows_are_its_layouts_beside_the_run(run):
    """A row per layout of the JSON, the run's own columns (model, dtypes ...) on each."""
    args = ("plan", "qwen3-30b-a3b", "--gpus", "8", "--hardware", "h100", "--seq", "4096", "--global-batch", "64",
            "--lora-rank", "16", "--weights-dtype", "nf4", "--all")
    data = json.loads(run(*args, "--json").stdout)
    rows = _csv(run(*args, "--format", "csv").stdout)
    assert len(rows) == len(data["layouts"]) > 1
    for row, layout in zip(rows, data["layouts"]):
        assert row["weights_dtype"] == "nf4" and row["dtype"] == "bf16"
        for path, cell in row.items():
            record = data if path.split(".")[0] in data.keys() - {"layouts"} else layout
            keys = path.replace("expected_", "expected.", 1).split(".")
            value = record
            for key in keys:  # a layout that does not fit has no step: a blank cell
                value = value.get(key) if isinstance(value, dict) else None
            assert cell == "" if value is None else _same(cell, value), (path, cell)


@pytest.mark.unit
def test_csv_of_one_model_and_workload_is_its_json_object(run):
    args = ("kvcache", "mistral-7b", "--seq", "8192", "--kv-dtype", "fp16", "--budget", "80GiB")
    data = json.loads(run(*args, "--json").stdout)
    (row,) = _csv(run(*args, "--format", "csv").stdout)
    assert {path: cell for path, cell in row.items()} == {path: str(_at(data, path)) for path in row}
    assert (row["bytes"], row["max_batch"], row["max_tokens"]) == ("536870912", "132", "544859")


@pytest.mark.unit
def test_params_csv_is_a_row_per_component(run):
    data = json.loads(run("params", "gpt2-xl", "--json").stdout)
    rows = _csv(run("params", "gpt2-xl", "--format", "csv").stdout)
    assert [r["component"] for r in rows] == list(data["components"])
    assert {r["component"]: int(r["params"]) for r in rows} == data["components"]
    per_layer = {r["component"]: int(r["per_layer"]) for r in rows if r["per_layer"]}
    assert per_layer == data["layer_groups"][0]["components"]
    assert {r["layers"] for r in rows if r["per_layer"]} == {"0-47"}
    assert sum(int(r["params"]) for r in rows) == data["total"] == 1_557_611_200


@pytest.mark.unit
def test_params_csv_of_several_layer_kinds_is_a_row_per_kind_and_component(run):
    data = json.loads(run("params", "gemma-2-9b", "--json").stdout)
    rows = _csv(run("params", "gemma-2-9b", "--format", "csv").stdout)
    groups = {"0,2,..,40": data["layer_groups"][0], "1,3,..,41": data["layer_groups"][1]}
    for r in rows:
        if r["layers"]:
            group = groups[r["layers"]]
            assert int(r["per_layer"]) == group["components"][r["component"]]
            assert int(r["params"]) == int(r["per_layer"]) * group["count"]
        else:
            assert int(r["params"]) == data["components"][r["component"]]
    assert len(rows) == sum(len(g["components"]) for g in groups.values()) + 2  # + embedding, final norm
    assert sum(int(r["params"]) for r in rows) == data["total"] == 9_241_705_984


@pytest.mark.unit
def test_flops_csv_is_a_row_per_component(run):
    args = ("flops", "gpt2-small", "--seq", "128", "--batch", "2")
    data = json.loads(run(*args, "--json").stdout)
    rows = _csv(run(*args, "--format", "csv").stdout)
    kinds = {"matmul": "components", "elementwise": "elementwise_components"}
    assert [r["component"] for r in rows] == [*data["total"]["components"], *data["total"]["elementwise_components"]]
    for r in rows:
        assert (r["model"], r["seq_len"], r["batch"], r["mode"]) == ("gpt2-small", "128", "2", "train")
        for phase in ("forward", "backward", "total"):
            assert int(r[phase]) == data[phase][kinds[r["kind"]]].get(r["component"], 0)
    assert sum(int(r["total"]) for r in rows) == data["total"]["total"]


@pytest.mark.unit
def test_memory_csv_is_a_row_per_part(run):
    args = ("memory", "mistral-7b", "--seq", "4096")
    data = json.loads(run(*args, "--json").stdout)
    rows = _csv(run(*args, "--format", "csv").stdout)
    assert {r["part"]: int(r["bytes"]) for r in rows} == {k: data[k] for k in (
        "weights", "gradients", "optimizer", "activations", "recomputed", "attention", "dequantization", "kv_cache",
        "logits")}
    assert sum(int(r["bytes"]) for r in rows) == data["total"]
    assert rows[0] == {"model": "mistral-7b", "mode": "train", "seq_len": "4096", "batch": "1", "part": "weights",
                       "bytes": str(2 * 7_241_732_096)}


@pytest.fixture
def fake_checks(monkeypatch):
    """Two checks in place of the reference model's (a count and a float tolerance check)."""
    from llmcalc.analysis.verify import report
    from llmcalc.analysis.verify.check import Check

    checks = [Check("params/total", 124_439_808, 124_439_808, True),
              Check("real/cached decode", 0.0, 2.5e-16, True, "max |difference| on float64 tensors")]
    monkeypatch.setattr(report, "verify", lambda cfg, device, seq, batch, hw, lora: checks)


@pytest.mark.reference
def test_verify_csv_is_a_row_per_check(run, fake_checks):
    data = json.loads(run("verify", "gpt2-small", "--device", "meta", "--json").stdout)
    rows = _csv(run("verify", "gpt2-small", "--device", "meta", "--format", "csv").stdout)
    assert [r["name"] for r in rows] == [c["name"] for c in data["checks"]] == ["params/total", "real/cached decode"]
    for row, check in zip(rows, data["checks"]):
        assert row == {"model": "gpt2-small", "device": "meta", "seq_len": "128", "batch": "2", "name": check["name"],
                       "analytic": str(check["analytic"]), "measured": str(check["measured"]), "ok": "true"}
    assert rows[1]["measured"] == "2.5e-16"


@pytest.mark.reference
def test_verify_table_notes_float_checks_under_the_table(run, fake_checks):
    result = run("verify", "gpt2-small", "--device", "meta")
    assert result.exit_code == 0
    assert "real/cached decode: max |difference| on float64 tensors\n" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("│ real/cached decode "))
    assert [c.strip() for c in row.split("│")[2:6]] == ["0", "2.5e-16", "", "ok"]


# --- every command, every format -----------------------------------------------------------------

COMMANDS = [["models"], ["params", "gpt2-small"], ["flops", "gpt2-small", "--seq", "64"],
            ["kvcache", "gpt2-small"], ["memory", "gpt2-small", "--seq", "64"],
            ["time", "gpt2-small", "--hardware", "h100", "--seq", "64"], ["hardware"],
            ["time", "gpt2-small", "--hardware", "h100", "--seq", "64", "--tp", "2", "--pp", "2"],
            ["plan", "gpt2-small", "--gpus", "4", "--hardware", "h100", "--seq", "64", "--global-batch", "8"]]


@pytest.mark.unit
@pytest.mark.parametrize("args", COMMANDS)
def test_json_flag_is_format_json(run, args):
    assert run(*args, "--json").stdout == run(*args, "--format", "json").stdout
    json.loads(run(*args, "--json").stdout)


@pytest.mark.unit
@pytest.mark.parametrize("args", COMMANDS)
def test_markdown_tables_are_pipe_tables(run, args):
    """Each table: a header row, an alignment row, then rows with as many cells."""
    result = run(*args, "--format", "markdown")
    assert result.exit_code == 0
    tables = [b for b in result.stdout.split("\n\n") if b.startswith("|")]
    assert tables
    for table in tables:
        lines = table.strip().split("\n")
        cells = [len(re.findall(r"(?<!\\)\|", line)) for line in lines]
        assert len(set(cells)) == 1 and cells[0] > 2
        assert re.fullmatch(r"\|(?::---|---:)(?:\|(?::---|---:))*\|", lines[1])


@pytest.mark.unit
def test_markdown_of_a_breakdown(run):
    lines = run("params", "gpt2-small", "--format", "markdown").stdout.splitlines()
    assert lines[:4] == ["**gpt2-small: parameters (12 layers)**", "",
                         "| component | per layer | total | share |", "|:---|---:|---:|---:|"]
    # attention/q: 768 x 768 weights + 768 biases, 12 layers
    assert "| attention/q | 590,592 | 7,087,104 | 5.7% |" in lines
    assert "| norm/final |  | 1,536 | \\<0.1% |" in lines
    assert "| **total** | **7,087,872** | **124,439,808** | **100.0%** |" in lines
    assert "embedding: 39,383,808   non-embedding: 85,056,000" in lines


@pytest.mark.unit
def test_markdown_escapes_what_markdown_would_read(run, config_file):
    path = config_file(GPT2_SMALL.replace("name: gpt2-small", "name: 'a|b*c_'"))
    out = run("params", path, "gpt2-small", "--format", "markdown").stdout
    assert "| a\\|b\\*c\\_ | 124,439,808 |" in out
    assert "| gpt2-small | 124,439,808 |" in out


@pytest.mark.reference
def test_verify_takes_every_format(run, fake_checks):
    out = run("verify", "gpt2-small", "--device", "meta", "--format", "markdown").stdout
    assert "| params/total | 124,439,808 | 124,439,808 | 0 | ok |" in out


# --- sweeps ----------------------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("command", ["flops", "kvcache", "memory"])
def test_seq_and_batch_lists_give_a_record_per_combination(run, command):
    args = (command, "gpt2-small", "--seq", "64,128", "--batch", "1,4")
    data = json.loads(run(*args, "--json").stdout)
    assert [(d["seq_len"], d["batch"]) for d in data] == [(64, 1), (64, 4), (128, 1), (128, 4)]
    for d in data:  # each record is the single run's object
        assert json.loads(run(command, "gpt2-small", "--seq", str(d["seq_len"]), "--batch", str(d["batch"]),
                              "--json").stdout) == d
    rows = [line.split("│")[2:4] for line in run(*args).stdout.splitlines() if "│ gpt2-small" in line]
    assert [(s.strip(), b.strip()) for s, b in rows] == [("64", "1"), ("64", "4"), ("128", "1"), ("128", "4")]


@pytest.mark.unit
def test_kvcache_sweep_figures(run):
    data = json.loads(run("kvcache", "gpt2-small", "--seq", "64,128", "--batch", "1,4", "--json").stdout)
    for d in data:  # 2 (K, V) x 12 layers x 768 x 4 bytes (fp32) per token
        assert d["bytes"] == d["seq_len"] * d["batch"] * 2 * 12 * 768 * 4


@pytest.mark.unit
def test_flops_and_memory_sweeps_scale_with_batch(run):
    flops = json.loads(run("flops", "gpt2-small", "--seq", "128", "--batch", "1,4", "--json").stdout)
    assert flops[1]["total"]["matmul"] == 4 * flops[0]["total"]["matmul"]
    memory = json.loads(run("memory", "gpt2-small", "--seq", "128", "--batch", "1,4", "--json").stdout)
    assert memory[0]["weights"] == memory[1]["weights"] == 2 * 124_439_808  # bf16 for training


@pytest.mark.unit
def test_one_model_and_workload_stays_an_object(run):
    for command in ("flops", "kvcache", "memory"):
        data = json.loads(run(command, "gpt2-small", "--seq", "64", "--batch", "2", "--json").stdout)
        assert isinstance(data, dict) and (data["seq_len"], data["batch"]) == (64, 2)


# --- bad input -------------------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("args, message", [
    (["kvcache", "gpt2-small", "--kv-dtype", ""],
     "Error: Invalid value for '--kv-dtype': '' is not one of 'fp32', 'fp16', 'bf16', 'fp8', 'int8', 'int4'.\n"),
    (["memory", "gpt2-small", "--dtype", ""],
     "Error: Invalid value for '--dtype': '' is not one of 'fp32', 'bf16', 'fp16', 'fp8'.\n"),
    (["kvcache", "gpt2-small", "--budget", "80"],
     "Error: Invalid value for '--budget': needs a unit: 80GiB (2^30 bytes) or 80GB (10^9 bytes), got '80'\n"),
    (["kvcache", "gpt2-small", "--budget", "1.5"],
     "Error: Invalid value for '--budget': needs a unit: 1.5GiB (2^30 bytes) or 1.5GB (10^9 bytes), got '1.5'\n"),
    (["flops", "gpt2-small", "--batch", "1,,2"],
     "Error: Invalid value for '--batch': expects a whole number such as 4096 or 128k, got ''\n"),
    (["memory", "gpt2-small", "--batch", "0"],
     "Error: Invalid value for '--batch' / '--micro-batch': must be >= 1, got 0\n"),
    (["verify", "gpt2-small", "--seq", "128,256"],
     "Error: Invalid value for '--seq': expects a whole number such as 4096 or 128k, got '128,256'\n"),
    (["verify", "gpt2-small", "--batch", "two"],
     "Error: Invalid value for '--batch': expects a whole number such as 4096 or 128k, got 'two'\n"),
    (["params", "gpt2-small", "--format", "xml"],
     "Error: Invalid value for '--format': 'xml' is not one of 'table', 'json', 'csv', 'markdown'.\n"),
    (["models", "--format", "csv", "--json"], "Error: --json means --format json; it cannot go with --format csv\n"),
])
def test_bad_values_exit_2(run, args, message):
    result = run(*args)
    assert (result.exit_code, result.stderr) == (2, message)


@pytest.mark.unit
@pytest.mark.parametrize("args", [
    ["flops", "gpt2-small", "--seq", "9" * 5000],
    ["flops", "gpt2-small", "--seq", "-" + "9" * 4000],
    ["kvcache", "gpt2-small", "--batch", "1," + "x" * 5000],
    ["kvcache", "gpt2-small", "--budget", "9" * 5000 + "GB"],
    ["kvcache", "gpt2-small", "--budget", "9" * 5000],
    ["kvcache", "gpt2-small", "--kv-dtype", "f" * 5000],
    ["memory", "gpt2-small", "--mode", "m" * 5000],
    ["params", "--format", "x" * 5000],
])
def test_a_huge_option_value_gives_a_short_error(run, args):
    result = run(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert len(result.stderr) < 200 and "..." in result.stderr


# the largest sizes a config may hold (2^53 each): figures past a million of the largest unit
HUGE = GPT2_SMALL.replace("name: gpt2-small", "name: huge").replace("vocab_size: 50257", f"vocab_size: {2**53}") \
    .replace("d_model: 768", f"d_model: {12 * 2**49}").replace("d_ff: 3072", f"d_ff: {2**53}")


@pytest.mark.unit
@pytest.mark.parametrize("args", [["params"], ["flops", "--seq", str(2**53)], ["kvcache", "--budget", "80GiB"],
                                  ["memory", "--seq", "64"], ["memory", "--mode", "inference", "--seq", "64"]])
def test_the_largest_figures_are_shown(run, config_file, args):
    result = run(args[0], config_file(HUGE), *args[1:])
    assert result.exit_code == 0, result.stderr
    assert re.search(r"\d\.\d\de\+\d{2,3} (B|FLOP)", result.stdout)


@pytest.mark.unit
@pytest.mark.parametrize("option", ["--seq", "--batch"])
def test_sizes_past_2_53_are_refused(run, option):
    result = run("flops", "gpt2-small", option, str(2**53 + 1))
    assert result.exit_code == 2
    assert result.stderr == (f"Error: Invalid value for '{option}': must be <= 2^53 = 9,007,199,254,740,992, got "
                             "9007199254740993\n")


@pytest.mark.unit
def test_units_past_float_range():
    assert iec(2**1100) == "1.36e+331 B"  # 2^1100 = 1.358...e331
    assert si(3 * 10**400, "FLOP") == "3.00e+400 FLOP"
    assert iec(1536 * 2**50) == "1,536.00 PiB"
    assert si(1_500_000_000_000, "FLOP") == "1.50 TFLOP"


@pytest.mark.unit
@pytest.mark.parametrize("budget, message", [
    ("1e300B", "has an exponent past 30, got '1e300B'"),
    # 2^53 + 1: not rounded to 2^53 as a float would
    ("9007199254740993B", "must be <= 2^53 = 9,007,199,254,740,992 bytes, got '9007199254740993B'"),
    ("100.7B", "is not a whole number of bytes, got '100.7B'"),
])
def test_a_budget_is_read_exactly(run, budget, message):
    result = run("kvcache", "gpt2-small", "--budget", budget)
    assert (result.exit_code, result.stderr) == (2, f"Error: Invalid value for '--budget': {message}\n")
    assert "budget 512 B = 512 bytes" in run("kvcache", "gpt2-small", "--budget", "0.5KiB").stdout


@pytest.mark.unit
@pytest.mark.parametrize("name", ["[/]", "[bold]x[/bold]", "[red]"])
def test_rich_markup_in_a_model_name_is_shown_as_written(run, config_file, name):
    path = config_file(GPT2_SMALL.replace("name: gpt2-small", f"name: '{name}'"))
    result = run("params", path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"{name}: parameters (12 layers)\n")
    assert f"│ {name} " in run("params", path, "gpt2-small").stdout
    result = run("flops", path, "--seq", "2048", "--json")
    assert result.stderr == f"Warning: {name}: --seq 2,048 exceeds its context length (1,024); computing anyway\n"


# --- an 80-column terminal -------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _terminal(*args: str, columns: int = 80) -> str:
    """What the CLI prints to a pseudo-terminal ``columns`` wide, colours removed."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "llmcalc.cli", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.DEVNULL, env={**os.environ, "COLUMNS": str(columns)})
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the child has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait() == 0
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


def _fits(out: str, columns: int = 80) -> None:
    """Every line within the terminal, nothing cut."""
    assert all(len(line) <= columns for line in out.splitlines())
    assert "…" not in out


def _whole(shown: str, out: str) -> bool:
    """``shown`` appears in ``out`` with no digit, separator or letter glued to either side."""
    return re.search(rf"(?<![\w,.]){re.escape(shown)}(?![\w,.])", out) is not None


@pytest.mark.unit
def test_params_of_every_model_at_80_columns(run):
    """Too wide for 80 columns: the table keeps every number whole and is printed at its least width
    (for the terminal to wrap), its names whole."""
    out = _terminal("params")
    assert "…" not in out and max(map(len, out.splitlines())) > 80
    for record in json.loads(run("params", "--json").stdout):
        assert f"│ {record['model']} " in out
        for key in ("total", "active", "embedding", "non_embedding"):
            assert _whole(f"{record[key]:,}", out), (record["model"], key)


@pytest.mark.unit
def test_kvcache_with_a_budget_at_80_columns(run):
    args = ("kvcache", "mistral-7b", "llama-2-7b", "--budget", "80GiB")
    out = _terminal(*args)
    assert "…" not in out
    assert "85,899,345,920" in out
    for r in json.loads(run(*args, "--json").stdout):
        shown = [f"{r['seq_len']:,}", f"{r['cached_tokens']:,}", iec(r["bytes_per_token"]), iec(r["bytes_per_layer"]),
                 iec(r["bytes"]), f"{iec(r['weights_bytes'])} ({r['weights_dtype']})", f"{r['max_batch']:,}",
                 f"{r['max_tokens']:,}"]
        assert all(_whole(s, out) for s in shown), (r["model"], shown)
        assert out.count(f"│ {r['model']} ") == 1
    # the tokens Mistral 7B's and Llama 2 7B's caches hold beside their bf16 weights in 80 GiB
    assert _whole(f"{(80 * 2**30 - 2 * 7_241_732_096) // (32 * 2 * 8 * 128 * 2):,}", out)
    assert _whole(f"{(80 * 2**30 - 2 * 6_738_415_616) // (32 * 2 * 32 * 128 * 2):,}", out)


def _first_column(out: str) -> list[str]:
    """The first cells of a table's rows, a cell folded over several lines joined again (without the
    spaces it may have been broken at)."""
    names = []
    for line in out.splitlines():
        cells = line.split("│")
        if len(cells) < 3:
            continue
        piece = cells[1].replace(" ", "")
        if cells[2].strip():
            names.append(piece)
        else:
            names[-1] += piece
    return names


@pytest.mark.reference
def test_verify_at_80_columns_keeps_every_check_name(run, bundled_copy):
    """GPT-2 small's shapes with 2 layers: every check name and figure of its verify, whole."""
    path = bundled_copy("gpt2-small", 2)
    out = _terminal("verify", path, "--device", "meta")
    _fits(out)
    data = json.loads(run("verify", path, "--device", "meta", "--json").stdout)
    assert _first_column(out) == [c["name"].replace(" ", "") for c in data["checks"]]
    for c in data["checks"]:
        assert _whole(f"{c['analytic']:,}", out) and _whole(f"{c['measured']:,}", out), c["name"]


# --- help ------------------------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("columns", ["60", "80"])
@pytest.mark.parametrize("command", ["models", "params", "flops", "kvcache", "memory", "time", "plan", "hardware",
                                     "verify"])
def test_help_examples_stay_whole(run, monkeypatch, command, columns):
    from llmcalc.cli.app import command as function

    doc = function(command).__doc__
    examples = [line.strip() for line in doc.splitlines() if line.strip().startswith("llmcalc ")]
    monkeypatch.setenv("COLUMNS", columns)
    lines = {line.strip(" │") for line in run(command, "--help").stdout.splitlines()}
    assert examples and all(e in lines for e in examples), examples


def _expand(label: str) -> list[int]:
    """The layers a label names, read as the docs define it: runs ``a-b``, and ``r0,r1,..,rk`` that
    repeats the runs r0 and r1 with their step up to rk."""
    def run(text: str) -> list[int]:
        a, _, b = text.partition("-")
        return list(range(int(a), int(b or a) + 1))

    parts = label.split(",")
    if ".." not in parts:
        return [i for p in parts for i in run(p)]
    k = parts.index("..")
    first, second, last = run(parts[0]), run(parts[1]), run(parts[k + 1])
    step, out = second[0] - first[0], []
    while not out or out[-1] < last[-1]:
        out += [i + step * (len(out) // len(first)) for i in first]
    return out + [i for p in parts[k + 2:] for i in run(p)]


@pytest.mark.unit
@given(st.lists(st.integers(0, 80), min_size=1, unique=True).map(sorted)
       | st.builds(lambda n, period, skip: [i for i in range(n) if i % period not in skip],
                   st.integers(1, 90), st.integers(2, 8), st.sets(st.integers(0, 7), max_size=3))
       .filter(lambda layers: len(layers) > 0))
def test_a_layer_list_names_exactly_its_layers(layers):
    assert _expand(layer_list(tuple(layers))) == layers


@pytest.mark.unit
@pytest.mark.parametrize("layers, label", [
    (range(32), "0-31"), (range(1, 42, 2), "1,3,..,41"), ((1, 3, 5), "1,3,5"), ((0, 1, 2, 5, 9), "0-2,5,9"),
    ([i for i in range(48) if i % 4 != 3], "0-2,4-6,..,44-46"),  # Qwen3-Next's Gated DeltaNet layers
    ([i for i in range(62) if i % 6 != 5], "0-4,6-10,..,54-58,60-61"),  # Gemma 3 27B's sliding layers
])
def test_a_repeating_pattern_of_layers_is_short(layers, label):
    assert layer_list(tuple(layers)) == label
