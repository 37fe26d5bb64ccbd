"""The console script, ``llmcalc`` (and ``python -m llmcalc.cli``).

The cycle collector is off before Typer, rich and the analysis are imported: an analytic command
lives for milliseconds and frees what it allocates as it goes, and collecting the objects its
imports create took a tenth of its start-up. verify, which runs for minutes, turns it back on."""

import gc

gc.disable()

from .app import main  # noqa: E402 (after gc.disable, on purpose)

if __name__ == "__main__":
    main()
