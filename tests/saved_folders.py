"""Helpers for tests that tamper with saved folders (importable from any test, like ``faults``).

A save records the sha256 of its files and of its manifest (:mod:`qrag_integrations.core.digests`),
so a hand-edited file is refused as damaged before any deeper check runs. Tests of those deeper
checks drop the digests first, as in a save of an older version or a folder made by someone else
(who could as well recompute them).
"""

from __future__ import annotations

import json
from pathlib import Path


def drop_digests(manifest_file: Path) -> None:
    """Remove the ``"digests"`` entry of a saved folder's manifest."""
    data = json.loads(manifest_file.read_text(encoding="utf-8"))
    data.pop("digests", None)
    manifest_file.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
