"""A non-editable install holds only the ``llmcalc`` package and works from any directory."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel of this checkout, unpacked into a bare target directory (no dependencies)."""
    tmp = tmp_path_factory.mktemp("pkg")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(ROOT), "-w", str(tmp / "dist")], check=True, capture_output=True)
    (wheel,) = (tmp / "dist").glob("llmcalc-*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp / "site")
    return tmp / "site"


def test_wheel_holds_only_the_llmcalc_namespace(installed):
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert top == {"llmcalc"}
    assert {p.name for p in (installed / "llmcalc").iterdir() if p.is_dir() and p.name != "__pycache__"} \
        == {"analysis", "cli", "model_configs"}
    assert (installed / "llmcalc" / "model_configs" / "mistral-7b.yaml").is_file()


def _run_installed(installed: Path, code: str) -> str:
    """Python from ``/`` with the unpacked wheel first on the path (the checkout is not)."""
    env = {**os.environ, "PYTHONPATH": str(installed)}
    out = subprocess.run([sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True,
                         check=True)
    return out.stdout


def test_python_api_from_anywhere(installed):
    code = ("import llmcalc; cfg = llmcalc.load_model('mistral-7b'); "
            "print(llmcalc.__file__); print(llmcalc.count_params(cfg).total)")
    where, total = _run_installed(installed, code).split()
    assert where == str(installed / "llmcalc" / "__init__.py")
    assert int(total) == 7_241_732_096


def test_console_entry_point_from_anywhere(installed):
    code = "import sys; sys.argv = ['llmcalc', 'models']; from llmcalc.cli.app import main; main()"
    out = _run_installed(installed, code)
    assert "mistral-7b" in out and "gpt2-xl" in out
