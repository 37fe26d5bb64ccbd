"""Ctrl-C in the console script's own process, sent as a terminal sends it (to the whole process
group) and twice, 0.1 s apart, as an impatient user presses it: exit 130 with one line on stderr,
never a traceback or an abort, no process of verify's left behind, not even a zombie, and its
temporary cache directory removed (cli/errors.py, analysis/verify/report.py, cli/caches.py)."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmcalc.analysis.verify.report import STACK_BYTES

pytestmark = [pytest.mark.reference, pytest.mark.slow]

MAIN = "import sys; from llmcalc.cli.__main__ import main; sys.argv = ['llmcalc', *sys.argv[1:]]; main()"
INTERRUPTED = b"Error: interrupted\n"


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """The environment with HOME and TMPDIR new, empty directories (torch's compile cache would land
    in TMPDIR) and nothing set that moves the cache."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    for folder in (home, tmp):
        folder.mkdir()
    return {**{k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME")},
            "HOME": str(home), "TMPDIR": str(tmp)}


def _foreground() -> None:
    """SIGINT at its default, as a terminal's foreground job has it: pytest started as a background job
    of a shell without job control (`(pytest &)`) passes SIGINT on ignored, which the console script
    rightly keeps ignoring (cli/errors.catch_ctrl_c)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", MAIN, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_foreground)


def _wait_for(proc: subprocess.Popen, condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"not {what} within 60 s"
        time.sleep(0.05)


def _has_torch(pid: int) -> bool:
    """Whether the process has loaded torch's library (it is importing torch, or done)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _vm_size(pid: int) -> int:
    match = re.search(r"VmSize:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) * 1024 if match else 0


def _interrupt_twice(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # the process, exited or not, is not reaped before communicate
    return proc.communicate(timeout=60)


def _nothing_left(proc: subprocess.Popen, env: dict[str, str]) -> None:
    with pytest.raises(ProcessLookupError):  # no process in its group: every child was reaped
        os.killpg(proc.pid, 0)
    assert [list(Path(env[k]).iterdir()) for k in ("HOME", "TMPDIR")] == [[], []]


@pytest.mark.parametrize("when", ["importing torch", "checks running"])
def test_two_ctrl_c_during_verify_exit_130_with_one_line(env, when):
    """While torch is imported, and while the checks run on their own thread inside torch (which
    the process leaves without waiting for: an orderly shutdown would abort). Mixtral takes
    seconds more than the test waits."""
    proc = _start(env, "verify", "mixtral-8x7b", "--device", "meta")
    _wait_for(proc, lambda: _has_torch(proc.pid), "importing torch")
    if when == "checks running":  # the checks' thread reserves its STACK_BYTES stack as it starts
        loaded = _vm_size(proc.pid)
        _wait_for(proc, lambda: _vm_size(proc.pid) > loaded + STACK_BYTES, "running the checks")
    out, err = _interrupt_twice(proc)
    assert (proc.returncode, out, err) == (130, b"", INTERRUPTED)
    _nothing_left(proc, env)


def test_two_ctrl_c_during_verify_jobs_reap_every_worker(env):
    """`--jobs 2` once both workers are importing torch: the workers (which ignore SIGINT) and the
    resource tracker that spawning them started are all reaped before the process exits."""
    proc = _start(env, "verify", "mixtral-8x7b", "mistral-7b", "--device", "meta", "--jobs", "2")

    def workers() -> list[int]:
        found = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "multiprocessing.spawn"], capture_output=True,
                               text=True).stdout.split()
        return [int(pid) for pid in found]

    _wait_for(proc, lambda: len(pids := workers()) == 2 and all(map(_has_torch, pids)), "running two workers")
    out, err = _interrupt_twice(proc)
    assert (proc.returncode, out, err) == (130, b"", INTERRUPTED)
    _nothing_left(proc, env)
