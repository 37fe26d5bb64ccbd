"""The caches of the libraries under verify and plot, kept in a temporary directory that is removed
when the command ends: a run writes nothing but the output asked for. Unasked, torch makes its
compile cache, ``$TMPDIR/torchinductor_$USER``, whenever ``torch._dynamo`` is imported (every
verify: building a module on meta imports it), and matplotlib its config directory and font list,
``~/.config/matplotlib`` and ``~/.cache/matplotlib``, at import. A variable the user has set is
left as it is: the cache goes where they asked (``MPLCONFIGDIR`` keeps plot's font list from one
run to the next)."""

import os
import tempfile
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def temporary_cache(variable: str) -> Iterator[None]:
    """Run with the environment variable ``variable`` naming a new temporary directory, removed and
    the variable unset on the way out (Ctrl-C included); spawned processes inherit it. Unchanged
    when the user has set it."""
    if os.environ.get(variable):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="llmcalc-") as path:
        os.environ[variable] = path
        try:
            yield
        finally:
            os.environ.pop(variable, None)
