"""`llmcalc verify` and the property-based proof: analytic == measured on the meta device."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import llmcalc.analysis.verify.report as report

pytestmark = pytest.mark.reference

STEPS = [(attention, recompute) for attention in ("eager", "flash") for recompute in report.recomputations(attention)]


@pytest.mark.parametrize("name", ["gpt2-small", "mistral-7b", "mixtral-8x7b"])
def test_verify_json_bundled(run, bundled_copy, name):
    """The JSON of `verify`: every family of checks, all exact. CI runs the full default verify
    of every bundled model just before the tests; here the bundled shapes with 2 layers (a
    window, GQA, experts) and a short sequence."""
    path = bundled_copy(name, 2)
    result = run("verify", path, "--device", "meta", "--seq", "32", "--batch", "1", "--json")
    assert result.exit_code == 0, result.stdout
    data = json.loads(result.stdout)
    assert (data["model"], data["device"], data["ok"]) == (name, "meta", True)
    names = [c["name"] for c in data["checks"]]
    for prefix in ("params/total", "flops/eager/forward/total", "flops/eager/backward/total",
                   "flops/flash/forward/total", "flops/flash/backward/total", "kv_cache/",
                   "flops/eager/recompute/backward/total", "flops/flash/recompute/backward/total",
                   "activations/eager/total", "activations/flash/total",
                   "activations/eager/recompute/total", "activations/flash/recompute/total",
                   "flops/eager/selective/backward/total", "activations/eager/selective/total",
                   "flops/eager/op/backward/total", "flops/flash/op/backward/total",
                   "activations/eager/op/total", "activations/flash/op/total"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert all(c["ok"] and c["analytic"] == c["measured"] for c in data["checks"])


def test_verify_warns_when_seq_passes_the_context(run, bundled_copy):
    """GPT-2 small's learned positions have 1,024 rows: a --seq past them is checked with a warning, as
    the analytic commands give it; verify's own default (128) warns of nothing."""
    path = bundled_copy("gpt2-small", 1)
    result = run("verify", path, "--device", "meta", "--seq", "1025", "--batch", "1", "--json")
    assert (result.exit_code, result.stderr) == (0, "Warning: gpt2-small: --seq 1,025 exceeds its context length "
                                                    "(1,024); computing anyway\n")


@pytest.mark.slow
def test_verify_cpu_runs_real_tensor_checks(run):
    result = run("verify", "gpt2-small", "--device", "cpu", "--json")
    data = json.loads(result.stdout)
    real = [c for c in data["checks"] if c["name"].startswith("real/")]
    assert result.exit_code == 0 and data["ok"] and len(real) == 6  # no RoPE check: learned positions
    assert all(c["measured"] < 1e-9 for c in real)


def test_wrong_formula_fails_with_exit_1(run, bundled_copy, monkeypatch):
    real = report.count_params

    def off_by_one(cfg):
        p = real(cfg)
        return p._replace(components={**p.components, "lm_head": p.components.get("lm_head", 0) + 1},
                          total=p.total + 1, active=p.active + 1)

    monkeypatch.setattr(report, "count_params", off_by_one)
    path = bundled_copy("gpt2-small", 2)
    result = run("verify", path, "--device", "meta", "--seq", "8", "--batch", "1")
    assert result.exit_code == 1
    assert "FAIL" in result.stdout
    total = result.stdout.split(" checks pass")[0].rsplit("/", 1)[1]  # the title's "n/N checks pass"
    assert result.stderr == f"Error: 2 of {total} checks failed: gpt2-small params/lm_head, gpt2-small params/total\n"
    # the JUnit file names the failed checks with both figures and their difference
    junit = path.parent / "verify.xml"
    assert run("verify", path, "--device", "meta", "--seq", "8", "--batch", "1", "--junit", junit).exit_code == 1
    failed = {case.get("name"): case.find("failure") for case in ET.parse(junit).iter("testcase")
              if case.find("failure") is not None}
    assert set(failed) == {"params/lm_head", "params/total"}
    two_layers = 124_439_808 - 10 * 7_087_872  # GPT-2 small's published total less ten of its layers
    assert failed["params/total"].get("message") == (f"analytic {two_layers + 1}, measured {two_layers}, "
                                                     "difference -1")


def test_junit_has_one_case_per_check(run, tmp_path, bundled_copy):
    """`verify gpt2-small --device meta --junit out.xml` (its shapes with one layer): a file a standard parser
    reads, one test case per check of the JSON, none failed."""
    junit = tmp_path / "out.xml"
    result = run("verify", bundled_copy("gpt2-small", 1), "--device", "meta", "--junit", junit, "--json")
    assert result.exit_code == 0, result.output
    checks = json.loads(result.stdout)["checks"]
    (suite,) = ET.parse(junit).getroot().iter("testsuite")
    cases = list(suite.iter("testcase"))
    assert [c.get("name") for c in cases] == [c["name"] for c in checks]
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("gpt2-small", str(len(checks)), "0")
    assert all(c.get("classname") == "llmcalc.verify.gpt2-small" and not list(c) for c in cases)


@pytest.mark.parametrize("args, message", [
    (["--device", "tpu"], "Error: Invalid value for '--device': 'tpu' is not one of 'auto', 'meta', 'cpu', 'cuda'.\n"),
    (["--seq", "0"], "Error: Invalid value for '--seq': must be >= 1, got 0\n"),
])
def test_verify_bad_usage(run, args, message):
    result = run("verify", "gpt2-small", *args)
    assert (result.exit_code, result.stderr) == (2, message)


def test_verify_without_torch_says_how_to_install(run, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    result = run("verify", "gpt2-small")
    assert result.exit_code == 2
    assert result.stderr == ("Error: llmcalc verify needs PyTorch 2.13: pip install torch==2.13.0 numpy (from "
                             "llmcalc's source tree: pip install -e '.[verify]'; the PyPI project named llmcalc "
                             "is unrelated)\n")


def test_verify_rejects_an_untested_torch(run, monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.4.1+cpu")
    result = run("verify", "gpt2-small", "--device", "meta")
    assert result.exit_code == 2
    assert result.stderr == ("Error: llmcalc verify is tested with PyTorch 2.13.x, found 2.4.1+cpu; "
                             "CPU machines: pip install torch==2.13.0\n")


def test_jobs_must_be_positive(run):
    result = run("verify", "gpt2-small", "--jobs", "0")
    assert result.exit_code == 2 and "Invalid value for '--jobs' / '-j': must be >= 1, got 0" in result.stderr


def test_jobs_with_a_layout_warns_that_it_is_ignored(run, bundled_copy):
    result = run("verify", bundled_copy("gpt2-small", 1), "--tp", "2", "--seq", "8", "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert "--jobs applies to the checks against llmcalc's reference" in result.stderr


@pytest.mark.slow
def test_verify_leaves_home_and_tmpdir_as_it_found_them(bundled_copy, tmp_path):
    """torch's compile cache (made when torch._dynamo is imported, in $TMPDIR/torchinductor_$USER
    unless moved) goes to a temporary directory removed at the end (cli/caches.py). With --jobs 2
    worker processes (the deeper model started first) give the serial run's results (--jobs 1) in the order
    asked for, nothing on stderr (no progress bar off a terminal), and every process is reaped: the
    workers and the resource tracker spawning them started."""
    main = "import sys; from llmcalc.cli.__main__ import main; sys.argv = ['llmcalc', *sys.argv[1:]]; main()"
    args = ["verify", bundled_copy("gpt2-small", 1), bundled_copy("mixtral-8x7b", 2), "--device", "meta", "--seq",
            "8", "--batch", "1", "--json"]
    moved = ("TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
    outputs = []
    for jobs in ("1", "2"):
        home, tmp = tmp_path / jobs / "home", tmp_path / jobs / "tmp"
        for folder in (home, tmp):
            folder.mkdir(parents=True)
        (home / ".profile").write_text("")
        env = {**{k: v for k, v in os.environ.items() if k not in moved}, "HOME": str(home), "TMPDIR": str(tmp)}
        proc = subprocess.Popen([sys.executable, "-c", main, *args, "--jobs", jobs], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        out, err = proc.communicate(timeout=120)
        assert (proc.returncode, err) == (0, b"")
        assert [m["model"] for m in json.loads(out)] == ["gpt2-small", "mixtral-8x7b"]
        assert sorted(home.rglob("*")) == [home / ".profile"] and list(tmp.iterdir()) == []
        with pytest.raises(ProcessLookupError):  # no process left in its group, not even a zombie
            os.killpg(proc.pid, 0)
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_junit_into_a_missing_directory_is_refused_before_any_check(run, tmp_path):
    result = run("verify", "gpt2-small", "--device", "meta", "--junit", tmp_path / "no" / "verify.xml")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"Error: --junit: no such directory {str(tmp_path / 'no')!r}\n"
