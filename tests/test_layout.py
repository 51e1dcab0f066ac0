"""The layout's import rules: each folder of `sim_core` is one stage of the data flow, and imports
only point back along it (config -> workload/memory/predictor -> schedulers -> cluster -> engine ->
results -> export/viz -> sweep/cli). `sim_core` never imports Streamlit or the app.

Imports are read from the source (every `import` statement, including those inside functions and
under `TYPE_CHECKING`), so a rule holds for type annotations too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "sim_core"

# folder -> folders of sim_core it must never import (any import, typing-only ones included)
FORBIDDEN = {
    "results": {"engine", "schedulers", "cluster", "export", "viz", "sweep", "cli"},
    "viz": {"engine", "schedulers", "cluster", "export", "cli"},
    "export": {"engine", "schedulers", "cluster", "viz", "sweep", "cli"},
    "engine": {"export", "viz", "sweep", "cli"},
    "schedulers": {"engine", "export", "viz", "sweep", "cli"},
    "config": {"engine", "cluster", "results", "export", "viz", "sweep", "cli", "workload", "memory",
               "predictor"},
    "catalog": {"engine", "cluster", "results", "export", "viz", "sweep", "cli", "schedulers", "config"},
    "workload": {"engine", "cluster", "results", "viz", "sweep", "cli", "schedulers"},
    "memory": {"engine", "cluster", "results", "export", "viz", "sweep", "cli", "schedulers"},
    "predictor": {"engine", "cluster", "results", "export", "viz", "sweep", "cli", "schedulers"},
    "scenarios": {"engine", "cluster", "results", "export", "viz", "sweep", "cli", "schedulers"},
    "sweep": {"viz", "cli"},
    "accuracy": {"viz", "cli", "sweep"},
}
APP_PACKAGES = {"streamlit", "explorer", "pages"}


def _imports(path: Path) -> set[str]:
    """Every absolute module name imported anywhere in the file (`from a.b import c` gives a.b)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _folder(path: Path) -> str:
    """The first-level part of sim_core a file belongs to: its folder, or the module's own name."""
    return path.relative_to(CORE).with_suffix("").parts[0]


def _core_files() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def _folder_edges() -> dict[str, dict[str, set[str]]]:
    """folder -> imported sim_core folder -> the files that import it."""
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in _core_files():
        source = _folder(path)
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "sim_core" and len(parts) > 1 and parts[1] != source:
                edges[source][parts[1]].add(str(path.relative_to(ROOT)))
    return edges


def test_the_folders_exist_as_the_rules_name_them():
    """Every folder a rule names is a package of sim_core (a renamed folder cannot silently escape)."""
    packages = {p.name for p in CORE.iterdir() if (p / "__init__.py").exists()}
    named = set(FORBIDDEN) | {f for banned in FORBIDDEN.values() for f in banned}
    assert named <= packages, named - packages


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_a_folder_imports_only_along_the_flow(folder):
    """A folder never imports a later stage of the flow (e.g. results never reads the engine)."""
    edges = _folder_edges()[folder]
    broken = {target: sorted(files) for target, files in edges.items() if target in FORBIDDEN[folder]}
    assert broken == {}


def test_the_core_never_imports_the_app():
    """No module of sim_core imports streamlit, explorer or pages."""
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in _imports(p) if n.split(".")[0] in APP_PACKAGES)
                 for p in _core_files()}
    assert {f: names for f, names in offenders.items() if names} == {}


def test_page_scripts_are_only_pages():
    """`pages/` holds page scripts only: nothing imports from it, so every helper lives in explorer/."""
    importers = {str(p.relative_to(ROOT)) for folder in ("sim_core", "explorer", "pages", "tests", "bench")
                 for p in (ROOT / folder).rglob("*.py") if any(n.split(".")[0] == "pages" for n in _imports(p))}
    importers |= {"app.py"} if any(n.split(".")[0] == "pages" for n in _imports(ROOT / "app.py")) else set()
    assert importers == set()
    assert not (ROOT / "pages" / "__init__.py").exists()


def test_the_rules_see_imports_inside_functions_and_type_checking(tmp_path):
    """The reader finds an import under TYPE_CHECKING and one inside a function (so the rules cannot be
    dodged by moving an import)."""
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sim_core.engine import x\n"
                     "def f():\n    import sim_core.viz.gantt\n")
    assert _imports(probe) == {"typing", "sim_core.engine", "sim_core.viz.gantt"}
