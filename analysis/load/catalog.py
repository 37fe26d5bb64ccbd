"""Loading models: a bundled name (``mistral-7b``), a YAML file, or a Hugging Face ``config.json``
(or the model directory holding one). Accelerators load the same way (:mod:`analysis.perf.hardware`).

The bundled configs live in ``model_configs/`` (one YAML per model, citing its source), the
Hugging Face configs they were checked against in ``model_configs/hf/``, the accelerators in
``model_configs/hardware/``: beside ``analysis`` both in the repository and installed
(``llmcalc/model_configs``).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError, brief
from ..model.checks import from_dict
from ..model.config import ModelConfig
from .files import config_file, read_json, read_text, read_yaml

MODEL_DIR = Path(__file__).resolve().parent.parent.parent / "model_configs"
HF_DIR = MODEL_DIR / "hf"
HARDWARE_DIR = MODEL_DIR / "hardware"  # read by analysis.perf.hardware


def unknown(what: str, spec: str, names: list[str], command: str) -> ConfigError:
    """The error for a name that is not bundled, with the nearest names."""
    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"unknown {what} {brief(spec)}{hint} (`llmcalc {command}` lists them)")


def bundled_files(folder: Path) -> list[str]:
    """The bundled files of ``folder``, by name."""
    return sorted(name[:-5] for name in os.listdir(folder) if name.endswith(".yaml"))  # no Path per file


def read(path: Path) -> tuple[Any, dict[str, int]]:
    """A YAML file and the line of each key (:func:`.files.read_yaml`)."""
    return read_yaml(read_text(path), str(path))


# -- models ------------------------------------------------------------------------------

def from_json(raw: Any, source: str) -> ModelConfig:
    """JSON is not quite a subset of YAML 1.1 (``1e6``, tabs): read it as JSON. A mapping with
    a ``model_type`` and no ``name`` is a Hugging Face config.json."""
    if isinstance(raw, dict) and "name" not in raw:
        if "model_type" not in raw:  # a config.json cut short, or an llmcalc config without its name
            raise ConfigError("missing: a Hugging Face config.json names its model_type, an llmcalc config its "
                              "name", source, "model_type")
        from .hf import from_hf_config  # its mappers (one per model_type) load only for a config.json

        return from_dict(from_hf_config(raw, source), source)
    return from_dict(raw, source)


def load_text(text: str, source: str) -> ModelConfig:
    if source.endswith(".json"):
        return from_json(read_json(text, source), source)
    raw, lines = read_yaml(text, source)
    return from_dict(raw, source, lines)


def load_path(path: Path) -> ModelConfig:
    """A YAML or JSON file, or a model directory holding a config.json."""
    path = config_file(path)
    return load_text(read_text(path), str(path))


def bundled_names() -> list[str]:
    return bundled_files(MODEL_DIR)


def load_bundled(name: str) -> ModelConfig:
    raw, lines = read(MODEL_DIR / f"{name}.yaml")
    return from_dict(raw, f"model_configs/{name}.yaml", lines)


def load_model(spec: str) -> ModelConfig:
    """A bundled name (``gpt2-xl``), a YAML path, a Hugging Face ``config.json`` path, or a
    model directory holding one (a Hugging Face cache snapshot)."""
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise ConfigError(f"a model is a bundled name or a path, got {brief(spec)}")
    names = bundled_names()
    if spec in names:
        return load_bundled(spec)
    if is_path(spec, (".yaml", ".yml", ".json")):
        return load_path(Path(spec))
    raise unknown("model", spec, names, "models")


def is_path(spec: str, suffixes: tuple[str, ...]) -> bool:
    """Whether ``spec``, not a bundled name, is read as a file: one that exists, or that looks like a path."""
    return os.path.lexists(spec) or spec.endswith(suffixes) or "/" in spec or os.sep in spec
