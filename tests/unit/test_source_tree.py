"""The source tree stays readable on its own: small modules, each with one job, and no pointer to
a file outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import qrag_integrations

REPO = Path(__file__).resolve().parents[2]
#: Most lines a module of the package may have.
MAX_LINES = 400


def test_no_module_of_the_package_is_over_400_lines() -> None:
    package = Path(qrag_integrations.__file__).parent
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in package.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_reference_to_notes_outside_the_repository() -> None:
    """The working notes these modules were written from are not shipped; cite the paper or a
    file in the repository instead."""
    sources = [*REPO.glob("*.md"), *(REPO / "benchmarks").glob("*.md"), *(REPO / "training").rglob("*.md")]
    for folder in ("qrag_integrations", "training", "benchmarks", "examples"):
        sources += (REPO / folder).rglob("*.py")
    outside = re.compile(r"shared/notes|algorithm\.md")
    assert [str(p.relative_to(REPO)) for p in sources if outside.search(p.read_text(encoding="utf-8"))] == []
