"""The one place where errors become exit codes (DESIGN.md section 5): :func:`guarded` around
a command, :func:`run` around the process, and :func:`usage_error` for click's own errors (an
unknown option, a value its type refuses), which the command group hands here.

Every failure ends as one line, ``Error: <message>``, on stderr (at most :data:`LINE`
characters, control characters escaped) and an exit code, never a traceback or click's boxed
usage text: 0 ok, 1 a verification check failed, 2 bad usage or a bad config (a closed stdout
included), and :data:`EXIT_PIPE` when the reader of stdout went away (``llmcalc params | head -1``).
A :class:`~analysis.errors.SpecError` names a run-spec field; :data:`FLAGS` gives the option that
sets it, so the line names what the user typed (``--pp 62 must be at most the 61 layers of ...``).
"""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import time
from contextlib import contextmanager
from typing import Callable, NoReturn

from ..analysis.errors import LONG, ConfigError, SpecError, UnmappedModelType, shorten

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for any writer whose reader left (`yes | head -1`)
EXIT_INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
LINE = 1000  # characters of an error line: room for every message llmcalc writes, not for an echoed file


# run-spec field -> the option that sets it (a field without one is named as it is)
FLAGS = {"mode": "--mode", "seq": "--seq", "batch": "--batch", "attention": "--attention", "causal": "--causal",
         "recompute": "--recompute", "all_logits": "--all-logits", "dtype": "--dtype", "fp8_scaling": "--fp8-scaling",
         "weights_dtype": "--weights-dtype", "kv_dtype": "--kv-dtype", "chunk": "--chunk", "optimizer": "--optimizer",
         "state_dtype": "--state-dtype", "grad_dtype": "--grad-dtype",
         "layout.tp": "--tp", "layout.pp": "--pp", "layout.dp": "--dp", "layout.ep": "--ep", "layout.cp": "--cp",
         "layout.vpp": "--vpp",
         "layout.zero": "--zero", "layout.sp": "--sp",
         "layout.async_tp": "--async-tp", "global_batch": "--global-batch", "gpus": "--gpus",
         "lora": "--lora-rank", "lora.rank": "--lora-rank", "lora.alpha": "--lora-alpha",
         "lora.targets": "--lora-targets", "efficiency.compute": "--compute-efficiency",
         "efficiency.bandwidth": "--bandwidth-efficiency",
         "new": "--new"}
FLAGS.update({"images": "--images", "image_size": "--image-size", "stage": "--stage", "budget": "--budget"})


def flag(field: str) -> str:
    return FLAGS.get(field, field)


class UsageError(ValueError):
    """A bad option value (``--seq 0``, ``--budget 12XB``): exit 2, one line on stderr."""


class VerificationFailed(Exception):
    """A check of `llmcalc verify` failed (the report is already printed): exit 1, the message (which checks)
    on stderr, where a CI log shows it apart from the report."""


def say(message: str) -> None:
    """``Error: <message>`` as one line on stderr; nothing when stderr is closed or gone."""
    try:
        sys.stderr.write(f"Error: {shorten(message, LINE)}\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # None, a broken pipe, a closed file: the exit code tells
        pass


def _os_message(exc: OSError) -> str:
    reason = exc.strerror or type(exc).__name__
    return f"{shorten(str(exc.filename), LONG)}: {reason}" if exc.filename else reason


def _silence_stdout() -> None:
    """Point stdout's descriptor at /dev/null: the interpreter's last flush of what is still
    buffered would otherwise fail again and print "Exception ignored" on stderr."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # no real descriptor (a test runner's stream)
        pass


@contextmanager
def reader_may_leave():
    """A broken pipe (``| head -1`` has read enough) ends the run quietly with EXIT_PIPE, where
    click and rich would exit 1."""
    try:
        yield
    except BrokenPipeError:
        _silence_stdout()
        raise SystemExit(EXIT_PIPE) from None
    except SystemExit as exc:
        if not isinstance(exc.__context__, BrokenPipeError):
            raise
        raise SystemExit(EXIT_PIPE) from None  # rich's console.on_broken_pipe (stdout already silenced)


@contextmanager
def guarded():
    """Run a command: what it raises ends as an exit code (SystemExit) and at most one line."""
    try:
        with reader_may_leave():
            yield
    except VerificationFailed as exc:
        say(str(exc))
        raise SystemExit(EXIT_FAILED) from None
    except SpecError as exc:
        say(f"{flag(exc.field)} {exc.message}")
        raise SystemExit(EXIT_USAGE) from None
    except UnmappedModelType as exc:  # a ConfigError whose line says whether transformers can count it
        from ..analysis.verify.fallback import unmapped_message  # asks transformers, when installed

        say(unmapped_message(exc))
        raise SystemExit(EXIT_USAGE) from None
    except (ConfigError, UsageError) as exc:
        say(str(exc))
        raise SystemExit(EXIT_USAGE) from None
    except OSError as exc:  # a path the analysis did not read (an output file), a full disk
        say(_os_message(exc))
        raise SystemExit(EXIT_USAGE) from None
    except RecursionError:  # a last resort: the readers bound nesting long before this
        say("input nested too deeply")
        raise SystemExit(EXIT_USAGE) from None
    except OverflowError as exc:  # a last resort: an option far past any model (--seq 10^400)
        say(f"a number too large to compute with ({exc})")
        raise SystemExit(EXIT_USAGE) from None
    except KeyboardInterrupt:  # Ctrl-C
        raise SystemExit(EXIT_INTERRUPTED) from None


_QUOTED = r"'[^'\n]{80,}'"  # a value click echoes in its message (compiled on first use, by re)


def usage_error(exc: Exception) -> int:
    """The exit code of one of click's errors (a usage error: 2), its message said in one line, a
    long value it quotes shortened; its usage text and boxes are left out. ``NoArgsIsHelpError`` is
    the help already printed for a command line that names no command."""
    if type(exc).__name__ != "NoArgsIsHelpError":
        message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
        say(re.sub(_QUOTED, lambda m: repr(shorten(m.group(0)[1:-1])), message))
    return EXIT_USAGE


GRACE = 1.0  # seconds after a Ctrl-C in which another does nothing: the first is on its way out
_pressed: list[float] = []  # when Ctrl-C last raised KeyboardInterrupt


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: KeyboardInterrupt, as Python's own handler raises, but not again within GRACE, so that
    a double press cannot cut the way out short (a temporary directory removed, verify's workers
    reaped) into a traceback. Past GRACE it raises again: one that a library swallowed (torch
    imports numpy from C++, clearing what that raises) is not the last the user can press."""
    now = time.monotonic()
    if _pressed and now - _pressed[-1] < GRACE:
        return
    _pressed.append(now)
    raise KeyboardInterrupt


def catch_ctrl_c() -> None:
    """Ctrl-C handled by :func:`_interrupted` from now on (the console script, first thing). A
    process started with SIGINT ignored keeps ignoring it, as Python itself does: a background job
    of a shell without job control, or one of `verify --jobs`' workers, which import the console
    script again as they start (multiprocessing's spawn)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)


def ignore_ctrl_c() -> None:
    """Ctrl-C does nothing from now on: the process is on its way out. SIG_IGN, not a handler of
    Python's: the interpreter's teardown puts the default back in place of those, and SIGINT would
    then kill the process with nothing said."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def end_interrupted() -> NoReturn:
    """End the process after Ctrl-C: exit 130 and one line, whatever Ctrl-C follows."""
    ignore_ctrl_c()
    try:
        sys.stdout.flush()  # what the command printed before the interrupt
    except (AttributeError, OSError, ValueError):  # no stdout, or its reader gone: the interrupt is what is said
        pass
    say("interrupted")
    # verify's checks run on a thread of their own (analysis.verify.report.on_deep_stack) that may
    # still be inside torch; an orderly interpreter shutdown would tear it down mid-call and abort
    # (SIGABRT).
    os._exit(EXIT_INTERRUPTED)


def run(command: Callable[[], object]) -> None:
    """Run ``command()``, the command line read and answered, as a process: the console
    script's one boundary around everything it does. stdout and stderr escape what they cannot
    encode (a lone surrogate from a config, an ASCII terminal) instead of raising; a closed
    stdout is a usage error; a closed stderr loses the error lines but not the exit code; a
    broken pipe ends the run quietly; Ctrl-C, however often, ends it with one line and exit 130."""
    if sys.stdout is None:  # started with stdout closed (`llmcalc params >&-`)
        say("standard output is closed: nowhere to write the results")
        sys.exit(EXIT_USAGE)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    code = EXIT_OK
    try:
        command()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # Ctrl-C outside the command's own handling (guarded, Typer's)
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        end_interrupted()
    try:  # what is still buffered: a reader that left after the last write shows up only here
        sys.stdout.flush()
    except OSError as exc:
        _silence_stdout()
        if isinstance(exc, BrokenPipeError):
            code = EXIT_PIPE
        elif not code:
            say(f"cannot write the results: {exc.strerror or type(exc).__name__}")
            code = EXIT_USAGE
    sys.exit(code)
