"""The reference PyTorch model and the measurements ``llmcalc verify`` makes with it.

Measurement relies on PyTorch internals that change between releases (FlopCounterMode's
per-op hook, autograd sequence numbers, the CPU flash kernel's signature), so verify runs
only on the PyTorch versions the test suite runs on: ``TESTED_TORCH``. This module imports torch
only inside :func:`torch_problem` and :func:`cuda_device` (the verify extra may be missing); the CLI
asks them before it imports the rest.
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


def torch_problem() -> str | None:
    """Why verify cannot run here (no torch, or a release it is not tested with), or None."""
    try:  # numpy first: torch imports it from C++ and clears what that raises, a Ctrl-C included
        import numpy  # noqa: F401
    except ImportError:  # torch runs without it, slower (pyproject's verify extra)
        pass
    try:
        import torch
    except ImportError:
        return ("llmcalc verify needs PyTorch 2.13: pip install torch==2.13.0 numpy (from llmcalc's source tree: "
                "pip install -e '.[verify]'; the PyPI project named llmcalc is unrelated)")
    return torch_version_problem(torch.__version__)


def cuda_device() -> str | None:
    """The name of the first CUDA device, or None without one."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
