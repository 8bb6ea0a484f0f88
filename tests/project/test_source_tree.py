"""The source tree stays readable on its own: small modules, each with one job, no import
circles, and no pointer to a file outside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[2]
#: The packages whose modules the rules below cover (every subpackage included).
PACKAGES = {
    "qrag_integrations": REPO / "qrag_integrations",
    "qrag_training": REPO / "training" / "qrag_training",
}
#: Most lines a module may have.
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages."""
    found = {}
    for name, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = [name, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``module`` imports at run time, at any depth of its code (function-level
    too; imports for type checkers only, under ``if TYPE_CHECKING:``, are not run and not counted)."""
    out = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in out if m in known and m != module}


def test_no_module_is_over_400_lines() -> None:
    sizes = {
        name: len(p.read_text(encoding="utf-8").splitlines()) for name, p in _modules().items()
    }
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_import_circles() -> None:
    """Module A importing B (anywhere in its code) while B imports A is a circle; an import
    inside a function does not break it. A package's ``__init__`` importing its own modules
    for re-export is not counted as the modules importing each other."""
    modules = _modules()
    graph = nx.DiGraph()
    for name, path in modules.items():
        for target in _imports(name, path, set(modules)):
            if not (
                path.name == "__init__.py" and target.startswith(name + ".")
            ) and not name.startswith(target + "."):
                graph.add_edge(name, target)
    assert sorted(sorted(c) for c in nx.simple_cycles(graph)) == []


def test_core_imports_no_framework_module() -> None:
    """``core/`` never imports LangChain / LlamaIndex or our ``frameworks/`` faces (at any depth)."""
    for name, path in _modules().items():
        if name.startswith("qrag_integrations.core"):
            text = path.read_text(encoding="utf-8")
            assert not re.search(
                r"^\s*(from|import) (langchain|llama_index|qrag_integrations\.frameworks)",
                text,
                re.MULTILINE,
            ), name


def test_no_reference_to_notes_outside_the_repository() -> None:
    """The working notes these modules were written from are not shipped; cite the paper or a
    file in the repository instead."""
    sources = [
        *REPO.glob("*.md"),
        *(REPO / "benchmarks").rglob("*.md"),
        *(REPO / "training").rglob("*.md"),
        *(REPO / "docs").rglob("*.md"),
    ]
    for folder in ("qrag_integrations", "training", "benchmarks", "examples"):
        sources += (REPO / folder).rglob("*.py")
    outside = re.compile(r"shared/notes|algorithm\.md")
    assert [
        str(p.relative_to(REPO)) for p in sources if outside.search(p.read_text(encoding="utf-8"))
    ] == []
