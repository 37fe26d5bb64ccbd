"""A non-editable install holds only the ``llmcalc`` package and works from any directory.

The distribution is ``llmcalc-exact`` (the PyPI name ``llmcalc`` is another project's); the
import package and the command stay ``llmcalc``.
"""

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.slow]  # builds and unpacks a wheel

ROOT = Path(__file__).resolve().parents[1]
# What the build reads. Copied to a temporary folder so that a stale ``build/`` in the checkout
# (setuptools keeps files there that were deleted from the sources) cannot leak into the wheel.
SOURCES = ("pyproject.toml", "README.md", "llmcalc", "analysis", "cli", "model_configs")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel of this checkout, unpacked into a bare target directory (no dependencies)."""
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(src), "-w", str(tmp / "dist")], check=True, capture_output=True)
    (wheel,) = (tmp / "dist").glob("*.whl")
    assert wheel.name.startswith("llmcalc_exact-0.1.0-"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp / "site")
    return tmp / "site"


def test_wheel_holds_only_the_llmcalc_namespace(installed):
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert top == {"llmcalc"}
    assert {p.name for p in (installed / "llmcalc").iterdir() if p.is_dir() and p.name != "__pycache__"} \
        == {"analysis", "cli", "model_configs"}
    assert (installed / "llmcalc" / "model_configs" / "mistral-7b.yaml").is_file()
    # `verify --against transformers` reads the shipped config.json of a bundled model
    assert (installed / "llmcalc" / "model_configs" / "hf" / "mistral-7b.json").is_file()
    # `llmcalc time --hardware h100` reads the bundled spec
    assert (installed / "llmcalc" / "model_configs" / "hardware" / "h100.yaml").is_file()
    # every sub-package of analysis is shipped
    assert {p.name for p in (installed / "llmcalc" / "analysis").iterdir() if p.is_dir() and p.name != "__pycache__"} \
        == {"model", "load", "count", "perf", "cluster", "verify"}


def test_distribution_is_llmcalc_exact_with_the_llmcalc_command(installed):
    (info,) = installed.glob("*.dist-info")
    meta = Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
    assert meta["Name"] == "llmcalc-exact"
    entry_points = configparser.ConfigParser()
    entry_points.read(info / "entry_points.txt", encoding="utf-8")
    assert dict(entry_points["console_scripts"]) == {"llmcalc": "llmcalc.cli.__main__:main"}


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
    code = "import sys; sys.argv = ['llmcalc', 'models']; from llmcalc.cli.__main__ import main; main()"
    out = _run_installed(installed, code)
    assert "mistral-7b" in out and "gpt2-xl" in out


def test_version_names_the_distribution(installed):
    """`llmcalc --version` is the distribution's version."""
    code = "import sys; sys.argv = ['llmcalc', '--version']; from llmcalc.cli.__main__ import main; main()"
    assert _run_installed(installed, code).strip() == "llmcalc 0.1.0"
