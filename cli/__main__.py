"""The console script, ``llmcalc`` (and ``python -m llmcalc.cli``).

The cycle collector is off before Typer, rich and the analysis are imported: an analytic command
lives for milliseconds and frees what it allocates as it goes, and collecting the objects its
imports create took a tenth of its start-up. verify, which runs for minutes, turns it back on.
Ctrl-C is handled before they are imported too (errors.catch_ctrl_c): pressed while they load, or
twice, it ends the process with exit 130 and one line."""

import gc

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
    try:
        answer()
    finally:
        ignore_ctrl_c()


if __name__ == "__main__":
    main()
