"""Modules stay small enough to read in one sitting: each of ``qrag_integrations`` has one job."""

from __future__ import annotations

from pathlib import Path

import qrag_integrations

#: Most lines a module of the package may have.
MAX_LINES = 400


def test_no_module_of_the_package_is_over_400_lines() -> None:
    package = Path(qrag_integrations.__file__).parent
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in package.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
