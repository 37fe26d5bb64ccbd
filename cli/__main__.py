"""The console script, ``llmcalc`` (and ``python -m llmcalc.cli``).

The cycle collector is off before Typer, rich and the analysis are imported: an analytic command
lives for milliseconds and frees what it allocates as it goes, and collecting the objects its
imports create took a tenth of its start-up. verify, which runs for minutes, turns it back on.
Ctrl-C is handled before they are imported too (errors.catch_ctrl_c): pressed while they load, or
twice, it ends the process with exit 130 and one line.

A command leaves with ``os._exit`` once its output is flushed when nothing in the process needs
the interpreter's teardown (every module freed, a last collection: a tenth of an analytic command's
run): no exit handler registered (torch's and matplotlib's are: verify, hardware calibrate and plot
exit normally) and no profiler or tracer watching (cProfile and coverage write after the script
returns). No command that leaves so starts a thread (verify's checks run on one, with torch loaded)."""

import atexit
import gc
import os
import sys

gc.disable()

# errors imports nothing that app would not (the standard library and analysis.errors)
from .errors import catch_ctrl_c, end_interrupted, ignore_ctrl_c  # noqa: E402 (after gc.disable, on purpose)

catch_ctrl_c()
try:
    from .app import main as answer  # noqa: E402
except KeyboardInterrupt:
    end_interrupted()


def main() -> None:
    """The application as a process (app.main). Once it has answered, Ctrl-C does nothing: the
    interpreter's shutdown that follows takes up to a second once torch is loaded (verify), and a
    Ctrl-C in it would end the process by SIGINT with nothing said."""
    code = None
    try:
        answer()  # ends in SystemExit, its exit code, once stdout is flushed (errors.run)
    except SystemExit as exc:
        code = exc.code
    finally:
        ignore_ctrl_c()
    if not isinstance(code, int) or atexit._ncallbacks() or sys.getprofile() or sys.gettrace():
        sys.exit(code)
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # stderr closed or gone: the exit code tells
        pass
    os._exit(code)


if __name__ == "__main__":
    main()
