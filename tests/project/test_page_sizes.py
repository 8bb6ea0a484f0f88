"""The documentation pages stay within their sizes: the README at most 250 lines, the results page
(benchmarks/README.md) at most 400, each page under docs/ at most 300. Detail that does not fit
goes into the ``.md`` beside a result file or into docs/decisions.md, not onto the page."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIMITS = {
    REPO / "README.md": 250,
    REPO / "benchmarks" / "README.md": 400,
    **{page: 300 for page in sorted((REPO / "docs").glob("*.md"))},
}


def test_every_page_is_counted() -> None:
    assert (REPO / "docs" / "training.md") in LIMITS and (REPO / "docs" / "decisions.md") in LIMITS
    assert all(page.is_file() for page in LIMITS)


@pytest.mark.parametrize(
    ("page", "limit"),
    LIMITS.items(),
    ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else str(v),
)
def test_page_is_within_its_size(page: Path, limit: int) -> None:
    lines = len(page.read_text(encoding="utf-8").splitlines())
    name = page.relative_to(REPO)
    assert lines <= limit, f"{name} has {lines} lines, more than its limit of {limit}"
