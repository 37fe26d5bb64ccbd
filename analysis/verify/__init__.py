"""The reference PyTorch model and the measurements ``llmcalc verify`` makes with it.

Measurement relies on PyTorch internals that change between releases (FlopCounterMode's
per-op hook, autograd sequence numbers, the CPU flash kernel's signature), so verify runs
only on the PyTorch versions the test suite runs on: ``TESTED_TORCH``. This module imports
no torch itself; the CLI checks the version before importing the rest.
"""

from __future__ import annotations

TESTED_TORCH = ("2.13",)  # major.minor releases the suite passes on (pyproject's extras pin the same)


def torch_version_problem(version: str) -> str | None:
    """Why ``version`` (``torch.__version__``) is unsupported, or None when it is supported."""
    release = ".".join(version.split("+")[0].split(".")[:2])
    if release in TESTED_TORCH:
        return None
    return (f"llmcalc verify is tested with PyTorch {', '.join(TESTED_TORCH)}.x, found {version}; "
            f"CPU machines: pip install torch==2.13.0")
