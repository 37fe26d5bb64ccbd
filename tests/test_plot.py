"""`llmcalc plot`: the images decode at the size set and are not blank; usage errors exit 2;
matplotlib stays out of every other command; a plot writes its image and nothing else."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llmcalc.cli.caches import temporary_cache
from llmcalc.cli.plot_cmd import default_seqs

pytestmark = pytest.mark.unit


def _decoded(path):
    """(height, width, distinct colours, share of coloured pixels) of a PNG. Text, axes and grid
    are grey; only the data (lines, bars in matplotlib's palette) is coloured."""
    import numpy as np
    from matplotlib.image import imread

    pixels = imread(path)[..., :3]
    rgb = (pixels * 255).astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])  # one integer per colour: fast
    coloured = pixels.max(axis=-1) - pixels.min(axis=-1) > 0.3
    return (*pixels.shape[:2], len(colours), float(coloured.mean()))


@pytest.mark.parametrize("args, size", [
    (["flops", "gpt2-small"], (475, 700)),  # one 5 x 3.5 in panel, at least 7 in wide, legend row
    (["flops", "mistral-7b", "llama-3.1-8b", "--seq", "1024,16384", "--mode", "prefill"], (475, 1000)),
    (["kvcache", "mistral-7b", "gemma-2-9b", "llama-2-7b", "--batch", "8", "--budget", "80GiB"], (550, 900)),
    (["memory", "gpt2-small", "llama-2-7b", "--seq", "1024", "--budget", "24GB"], (550, 700)),
    (["memory", "gpt2-small", "--mode", "inference", "--kv-dtype", "fp8"], (550, 700)),
    # batch 8: decode's points apart from prefill's (a flash prefill's all sit at the compute roof)
    (["roofline", "llama-3-8b", "--hardware", "h100", "--seq", "2048", "--batch", "8"], (550, 700)),
    (["roofline", "mistral-7b", "gemma-2-9b", "--hardware", "l4", "--batch", "8", "--attention", "eager"],
     (550, 1000)),
])
def test_png_has_the_size_set_and_is_not_blank(run, tmp_path, args, size):
    out = tmp_path / "chart.png"
    result = run("plot", *args, "--out", out)
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"wrote {out}\n", "")
    height, width, colours, coloured = _decoded(out)
    assert (height, width) == size
    assert colours > 50 and coloured > 0.003


def test_svg_is_an_svg_document_with_paths(run, tmp_path):
    out = tmp_path / "kv.SVG"
    assert run("plot", "kvcache", "mistral-7b", "--out", out).exit_code == 0
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 20


def test_seq_past_the_context_warns_once_per_model(run, tmp_path):
    result = run("plot", "flops", "gpt2-xl", "--seq", "1024,4096,16384", "--out", tmp_path / "f.png")
    assert result.exit_code == 0
    assert result.stderr.count("exceeds its context length") == 1


def test_default_seqs_are_powers_of_two_from_512_to_the_context():
    assert default_seqs(1024) == [512, 1024]
    assert default_seqs(163840) == [2**k for k in range(9, 18)] + [163840]
    assert default_seqs(300) == [300]


@pytest.mark.parametrize("args, message", [
    (["bars", "gpt2-small", "--out", "x.png"],
     "Invalid value for 'KIND': 'bars' is not one of 'flops', 'kvcache', 'memory', 'roofline'."),
    (["roofline", "gpt2-small", "--out", "x.png"], "plot roofline needs --hardware NAME|FILE (`llmcalc hardware`)"),
    (["roofline", "gpt2-small", "--out", "x.png", "--hardware", "h100", "--seq", "512,1024"],
     "--seq takes one value for plot roofline"),
    (["flops", "gpt2-small", "--out", "x.png", "--hardware", "h100"], "--hardware does not apply to plot flops"),
    (["flops", "gpt2-small", "--out", "x.jpg"], "--out must end in .png or .svg, got 'x.jpg'"),
    (["flops", "gpt2-small", "--out", "no/such/dir/x.png"], "--out: no such directory 'no/such/dir'"),
    (["flops", "gpt2-small", "--out", "x.png/"], "--out 'x.png/' names a directory; name the image file, such as "
                                                 "chart.png"),
    (["flops", "gpt2-small", "--out", "x.png", "--budget", "80GiB"], "--budget does not apply to plot flops"),
    (["kvcache", "gpt2-small", "--out", "x.png", "--mode", "train"], "--mode does not apply to plot kvcache"),
    (["flops", "gpt2-small", "--out", "x.png", "--mode", "inference"],
     "--mode of plot flops must be one of train, prefill, decode, got 'inference'"),
    (["memory", "gpt2-small", "--out", "x.png", "--mode", "decode"],
     "--mode of plot memory must be one of train, inference, got 'decode'"),
    (["memory", "gpt2-small", "--out", "x.png", "--seq", "512,1024"], "--seq takes one value for plot memory"),
    (["kvcache", "gpt2-small", "--out", "x.png", "--batch", "0"], "Invalid value for '--batch': must be >= 1, got 0"),
    (["kvcache", "gpt2-small", "--out", "x.png", "--budget", "12XB"],
     "Invalid value for '--budget': expects a number with a byte unit, such as 80GiB or 80GB, got '12XB'"),
])
def test_bad_usage_exits_2_with_one_line(run, args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # were one accepted by mistake, its x.png lands here, not in the checkout
    result = run("plot", *args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"Error: {message}\n")


def test_without_matplotlib_says_how_to_install(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    result = run("plot", "kvcache", "mistral-7b", "--out", tmp_path / "kv.png")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("Error: llmcalc plot needs matplotlib: pip install matplotlib (from llmcalc's "
                             "source tree: pip install -e '.[plot]')\n")
    assert not (tmp_path / "kv.png").exists()


def test_other_commands_never_import_matplotlib():
    # A fresh interpreter: this one has imported matplotlib for the tests above.
    code = ("import sys\n"
            "from typer.testing import CliRunner\n"
            "from llmcalc.cli.app import app\n"
            "for args in (['models'], ['params', 'gpt2-small'], ['flops', 'gpt2-small'], "
            "['kvcache', 'mistral-7b', '--budget', '80GiB'], ['memory', 'gpt2-small'], ['plot', '--help']):\n"
            "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "[]\n"


@pytest.mark.slow
@pytest.mark.parametrize("model, out, code", [
    ("no-such-model", "chart.png", 2),  # refused before matplotlib is imported
    ("gpt2-small", "folder.png", 2),  # matplotlib imported, then the image cannot be written over a directory
    ("gpt2-small", "chart.png", 0),
])
def test_plot_leaves_home_and_tmpdir_as_it_found_them(tmp_path, model, out, code):
    """matplotlib's config directory and font list (~/.config/matplotlib, ~/.cache/matplotlib unless
    moved) go to a temporary directory removed at the end (cli/caches.py)."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    for folder in (home, tmp, tmp_path / "folder.png"):
        folder.mkdir()
    (home / ".profile").write_text("")
    moved = ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")  # each would move matplotlib's files elsewhere
    env = {**{k: v for k, v in os.environ.items() if k not in moved}, "HOME": str(home), "TMPDIR": str(tmp)}
    main = "import sys; from llmcalc.cli.__main__ import main; sys.argv = ['llmcalc', *sys.argv[1:]]; main()"
    proc = subprocess.run([sys.executable, "-c", main, "plot", "flops", model, "--out", tmp_path / out], env=env,
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, len(proc.stderr.splitlines())) == (code, 1 if code else 0), proc.stderr
    assert sorted(home.rglob("*")) == [home / ".profile"] and list(tmp.iterdir()) == []


def test_a_cache_directory_the_user_chose_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path))
    with temporary_cache("MPLCONFIGDIR"):
        assert os.environ["MPLCONFIGDIR"] == str(tmp_path)
    monkeypatch.delenv("MPLCONFIGDIR")
    with temporary_cache("MPLCONFIGDIR"):
        made = Path(os.environ["MPLCONFIGDIR"])
        assert made.is_dir()
    assert not made.exists() and "MPLCONFIGDIR" not in os.environ
