"""The import graph, read with ast from the source: no circle inside analysis/, sub-packages that
import one way, imports at the top of modules except the documented lazy ones, and torch in
analysis/verify only (DESIGN.md section 1)."""

import ast
import functools
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"llmcalc": ROOT / "llmcalc", "llmcalc.analysis": ROOT / "analysis", "llmcalc.cli": ROOT / "cli"}
# what a function may import: the heavy optional dependencies (the verify, hf and plot extras), and the
# project's modules that import torch themselves (analysis.verify's)
HEAVY = ("torch", "transformers", "matplotlib", "numpy")
# and the modules loaded only when asked for: the Hugging Face mappers (one per model_type) and
# json, only for a config.json (or --json), not for a bundled model's YAML; csv, only for --csv;
# the cluster model (a step, a generation), only for a parallel `time`; the transformers fallback, only
# for a config.json of a model_type without a mapper (it imports torch and transformers inside its
# functions: the hf extra may be missing); the vision tower, only for a multimodal checkpoint (the recurrent
# mixers, only for a model with such layers, come by name: architecture.mixer_kind, keys.nested)
LAZY = {"llmcalc.analysis.load.hf", "json", "csv", "llmcalc.analysis.cluster.step",
        "llmcalc.analysis.cluster.generation", "llmcalc.analysis.verify.fallback", "llmcalc.analysis.model.vision",
        "llmcalc.analysis.model.hyper",  # imported for a model with hyper-connections alone
        "llmcalc.analysis.model.shared_transformer",  # and for one with Zamba's shared blocks alone
        "llmcalc.analysis.model.kv_sharing",  # and for one whose last layers reuse K/V alone
        "llmcalc.analysis.model.gemma3n",  # and for one with Gemma 3n's layers alone
        "llmcalc.analysis.cluster.sharding"}  # by cli/common for a sweep of every bundled model under a layout alone
# what each sub-package of analysis may import besides itself (the package docstring's order)
LAYERS = {
    "errors": set(),
    "numbers": set(),
    "model": {"errors", "numbers"},
    "spec": {"errors", "numbers", "model"},
    "load": {"errors", "numbers", "model"},
    "count": {"errors", "numbers", "model", "spec"},
    "perf": {"errors", "numbers", "model", "spec", "load", "count"},
    "cluster": {"errors", "numbers", "model", "spec", "count", "perf"},
    "verify": {"errors", "numbers", "model", "spec", "load", "count", "perf", "cluster"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The modules an import statement of ``module`` loads (names imported from a package that are
    its submodules count as modules)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = module if _is_package(module) else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    target = ".".join(filter(None, (base if node.level else "", node.module or "")))
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(name: str) -> tuple[list[str], list[tuple[int, str]]]:
    """(modules imported when ``name`` is, (line, module) imported inside its functions)."""
    tree = ast.parse(MODULES[name].read_text())
    top, inner = [], []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue  # annotations only: nothing is imported at run time
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _resolve(name, child):
                    (inner.append((child.lineno, target)) if in_function else top.append(target))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return top, inner


@functools.cache
def _graph() -> dict[str, tuple[list[str], list[tuple[int, str]]]]:
    """Every module's imports, read when a test first asks (not at collection: each pytest-xdist worker
    collects every module, one runs these tests)."""
    return {name: _imports(name) for name in MODULES}


def _project(target: str) -> str | None:
    """The project module ``target`` names (a name imported from a module is that module)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def test_no_import_circle_inside_analysis():
    edges = {name: {t for t in map(_project, _graph()[name][0]) if t and t.startswith("llmcalc.analysis")}
             for name in MODULES if name.startswith("llmcalc.analysis")}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(edges[name]):
            assert state.get(target) != 1, " -> ".join(path[path.index(target):] + [target])
            if target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)


def _layer(name: str) -> str:
    return name.removeprefix("llmcalc.analysis.").split(".")[0]


def test_analysis_sub_packages_import_one_way():
    for name, (top, _) in _graph().items():
        if not name.startswith("llmcalc.analysis.") or name == "llmcalc.analysis":
            continue
        for target in filter(None, map(_project, top)):
            if target.startswith("llmcalc.analysis.") and _layer(target) != _layer(name):
                assert _layer(target) in LAYERS[_layer(name)], f"{name} imports {target}"


def _imports_torch(name: str) -> bool:
    return any(t.split(".")[0] == "torch" for t in _graph()[name][0])


def test_imports_are_at_the_top_but_the_heavy_optional_ones():
    for name, (_, inner) in _graph().items():
        for line, target in inner:
            project = _project(target)
            heavy = target.split(".")[0] in HEAVY or (project is not None and _imports_torch(project)) \
                or target in LAZY
            assert heavy, f"{MODULES[name].relative_to(ROOT)}:{line} imports {target} inside a function"


def test_torch_only_in_analysis_verify():
    for name, (top, inner) in _graph().items():
        torch = [t for t in top + [t for _, t in inner] if t.split(".")[0] == "torch"]
        assert not torch or name.startswith("llmcalc.analysis.verify"), name


def test_the_graph_is_read_whole():
    """The reading above sees the imports that matter: a few edges known to exist."""
    assert "llmcalc.analysis.model.config" in _graph()["llmcalc.analysis.model.checks"][0]
    assert "torch" in _graph()["llmcalc.analysis.verify.model"][0]
    assert (_graph()["llmcalc.cli.verify_cmd"][1] and
            all(_project(t) is None or _imports_torch(_project(t)) for _, t in _graph()["llmcalc.cli.verify_cmd"][1]))
