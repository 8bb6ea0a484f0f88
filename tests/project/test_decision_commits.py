"""The commits docs/decisions.md names are real: each exists and is dated as its entry, and each
row of the "tried and not shipped" table names a commit that recorded the result (it touches
docs/decisions.md, docs/experiments.md, the results page or a ``results/`` file), not one made
the same day for something else. Skipped without the git history (a shallow clone, an sdist)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DECISIONS = ROOT / "docs" / "decisions.md"
#: ``**2026-11-22 · What · c30e1cb.**`` (a paragraph or a bullet) or ``| 2026-11-26 · 0077d4b |``
#: (a row of the table of what was tried and not shipped).
ENTRY = re.compile(
    r"^(?:- )?\*\*(?P<date>\d{4}-\d\d-\d\d) · .+? · (?P<commits>[^*]+?)\.\*\*"
    r"|^\| (?P<row_date>\d{4}-\d\d-\d\d) · (?P<row_commits>[0-9a-f, ]+) \|",
    re.MULTILINE,
)
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
RECORDS = re.compile(
    r"^(docs/decisions\.md|docs/experiments\.md|benchmarks/README\.md|.*/results/)"
)


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def _history_present() -> bool:
    if shutil.which("git") is None or _git("rev-parse", "--git-dir").returncode != 0:
        return False
    return _git("rev-parse", "--is-shallow-repository").stdout.strip() == "false"


def entries() -> list[tuple[str, list[str], bool]]:
    """``(date, commits, is_table_row)`` of every entry of docs/decisions.md."""
    found = []
    for m in ENTRY.finditer(DECISIONS.read_text(encoding="utf-8")):
        row = m["row_date"] is not None
        commits = COMMIT.findall(m["row_commits"] if row else m["commits"])
        found.append((m["row_date"] if row else m["date"], commits, row))
    return found


def test_the_entry_pattern_reads_every_entry() -> None:
    found = entries()
    assert len(found) >= 35 and all(commits for _, commits, _ in found)


@pytest.mark.skipif(not _history_present(), reason="needs the full git history")
def test_each_named_commit_exists_is_dated_as_its_entry_and_rows_name_their_record() -> None:
    problems = []
    for date, commits, row in entries():
        records = False
        for commit in commits:
            shown = _git("show", "--no-patch", "--format=%ad", "--date=short", commit)
            if shown.returncode != 0:
                problems.append(f"{date} · {commit}: no such commit")
                continue
            if shown.stdout.strip() != date:
                problems.append(f"{date} · {commit}: the commit is of {shown.stdout.strip()}")
            files = _git("show", "--name-only", "--format=", commit).stdout.split()
            records = records or any(RECORDS.match(f) for f in files)
        if row and not records:
            problems.append(f"{date} · {', '.join(commits)}: no named commit records a result")
    assert problems == []
