"""How many package files one default ``invoke()`` runs code in (issue 69's target: at most 12).

A default retriever (the default checkpoint, in memory, default options) is built over the demo
sample's chunks, one ``invoke()`` of its question warms it, and a second runs under
``sys.settrace``: every file under ``qrag_integrations/`` that a Python frame of the call runs in
is counted (construction and the first call's one-off work are not). 23 files at commit b76462e,
14 after issue 69's move.

    python -m benchmarks.invoke_files.run          # the count, then the files
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import qrag_integrations
from qrag_integrations import QRAGRetriever

PACKAGE = Path(qrag_integrations.__file__).resolve().parent
SAMPLE = PACKAGE / "assets" / "demo_sample.json"


def invoke_files() -> list[str]:
    """The package files (relative to the package) that one warm default ``invoke()`` runs in."""
    sample = json.loads(SAMPLE.read_text())
    retriever = QRAGRetriever.from_texts(sample["chunks"])
    retriever.invoke(sample["question"])
    seen: set[str] = set()

    def trace(frame: FrameType, event: str, arg: Any) -> None:
        seen.add(frame.f_code.co_filename)

    sys.settrace(trace)  # the search runs in this thread (torch's threads run no Python)
    try:
        retriever.invoke(sample["question"])
    finally:
        sys.settrace(None)
    inside = {Path(f).resolve() for f in seen if Path(f).resolve().is_relative_to(PACKAGE)}
    return sorted(str(p.relative_to(PACKAGE)) for p in inside)


if __name__ == "__main__":
    files = invoke_files()
    print(len(files))
    print("\n".join(files))
