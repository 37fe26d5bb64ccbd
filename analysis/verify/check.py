"""One verification check: a name, the analytic and the measured figure, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    analytic: int | float
    measured: int | float
    ok: bool
    note: str = ""
