"""The source tree stays readable on its own: an import contract (layers, no import circles), each
module with one job, and no pointer to a file outside the repository."""

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
#: The framework-free core: it imports nothing of ours above it (``_version`` is a leaf).
CORE = "qrag_integrations.core"
CORE_MAY_IMPORT = ("qrag_integrations.core", "qrag_integrations._version")
#: Circles the contract still finds (none): a new circle fails the test.
KNOWN_CIRCLES: list[list[str]] = []


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
    """The package modules ``module`` imports, at any depth of its code: function-level imports
    and imports for type checkers only (under ``if TYPE_CHECKING:``) count too, since a module
    that needs another's types depends on it as much as one that calls it."""
    out = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


def _graph() -> nx.DiGraph:
    """Module -> the package modules it imports (:func:`_imports`), every module a node."""
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, target) for target in _imports(name, path, set(modules)))
    return graph


def _inside(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_no_import_circles() -> None:
    """Module A importing B (anywhere in its code, for type checkers only included) while B
    imports A, directly or through others, is a circle. A package's ``__init__`` importing its
    own modules for re-export, and a module importing the package it is in, are not counted as
    the modules importing each other."""
    graph = nx.DiGraph(
        (a, b) for a, b in _graph().edges if not b.startswith(a + ".") and not a.startswith(b + ".")
    )
    assert sorted(sorted(c) for c in nx.simple_cycles(graph)) == KNOWN_CIRCLES


def test_core_imports_nothing_above_it() -> None:
    """``qrag_integrations.core`` is the bottom layer: ``frameworks``, ``stores``, ``llm``,
    ``ingest`` and the command-line modules import it, never the reverse."""
    graph = _graph()
    upward = sorted(
        (a, b)
        for a, b in graph.edges
        if _inside(a, CORE) and _inside(b, "qrag_integrations") and not _inside(b, *CORE_MAY_IMPORT)
    )
    assert upward == []


def test_qrag_integrations_never_imports_the_trainer() -> None:
    """``qrag_training`` builds on ``qrag_integrations``, never the reverse (benchmarks may import
    both)."""
    graph = _graph()
    upward = sorted(
        (a, b)
        for a, b in graph.edges
        if _inside(a, "qrag_integrations") and _inside(b, "qrag_training")
    )
    assert upward == []


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
