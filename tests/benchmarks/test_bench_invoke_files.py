"""benchmarks/invoke_files: the package files one default ``invoke()`` runs code in stay few
(issue 69: 23 before the strategies, the loop and the positions were each put in one place, 14
after; the aim is 12)."""

from __future__ import annotations

import pytest

from benchmarks.invoke_files.run import invoke_files

#: The count after issue 69's move; a change that spreads a query's walk over more files fails.
MOST = 14


@pytest.mark.slow
def test_a_default_invoke_runs_in_few_package_files() -> None:
    files = invoke_files()
    assert len(files) <= MOST, files
    assert all(f.startswith(("core/", "frameworks/")) for f in files), files
    assert "core/search.py" in files and "core/exact_scan.py" in files
