"""Packaging promises: an SPDX licence string, and a test suite that never skips for a missing
package (what the tests need is in the ``test`` extra)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_license_is_an_spdx_string_that_setuptools_reads_without_warning() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"
    # SPDX strings need setuptools >= 77 (older ones want the deprecated table form)
    assert "setuptools>=77" in project["build-system"]["requires"]


def test_optional_test_packages_are_in_the_test_extra_and_no_test_skips() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    test_extra = project["project"]["optional-dependencies"]["test"]
    extra = {re.split(r"[<>=!~ \[]", req, maxsplit=1)[0] for req in test_extra}
    assert {"langchain-text-splitters", "rotary-embedding-torch", "scikit-learn"} <= extra
    # the one test that may skip: it reads git history, which a shallow clone or an sdist lacks
    may_skip = {Path(__file__).name, "test_decision_commits.py"}
    skipping = [
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("*.py")
        if path.name not in may_skip
        and re.search(r"importorskip\(|pytest\.skip\(|mark\.skip", path.read_text(encoding="utf-8"))
    ]
    assert skipping == []
