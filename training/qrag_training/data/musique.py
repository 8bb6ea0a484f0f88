"""MuSiQue loader (the published JSONL format).

One JSON object per line: ``{id, question, answer, answer_aliases, answerable,
paragraphs: [{idx, title, paragraph_text, is_supporting}, ...],
question_decomposition: [...]}``. One chunk per paragraph in ``idx`` order, text
``"<title>: <paragraph_text>"``; ``titles`` filled; support = paragraphs with
``is_supporting``. Unanswerable questions (MuSiQue-Full) are skipped unless asked for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import TITLE_SEPARATOR
from qrag_training.data.splits import ALL, check_split, filter_split, split_of

SOURCE_NAME = "musique"


def musique_episode(record: dict[str, Any]) -> Episode:
    """Turn one MuSiQue record into an episode.

    Args:
        record: The parsed JSON object.

    Returns:
        The episode.
    """
    paragraphs = sorted(record["paragraphs"], key=lambda p: p.get("idx", 0))
    titles = [str(p["title"]) for p in paragraphs]
    return Episode(
        id=str(record["id"]),
        question=record["question"],
        chunks=[f"{p['title']}{TITLE_SEPARATOR}{p['paragraph_text'].strip()}" for p in paragraphs],
        support=[i for i, p in enumerate(paragraphs) if p.get("is_supporting")],
        answer=record.get("answer"),
        titles=titles,
        meta={
            "source": SOURCE_NAME,
            "answerable": record.get("answerable", True),
            "answer_aliases": list(record.get("answer_aliases", [])),
            "split": split_of(str(record["id"])),
        },
    )


def load_musique(
    path: str | Path, split: str = ALL, limit: int | None = None, include_unanswerable: bool = False
) -> list[Episode]:
    """Load a MuSiQue JSONL file (e.g. musique_ans_v1.0_dev.jsonl) as episodes.

    Args:
        path: The JSONL file.
        split: "all", or "train" / "val" / "eval" by the stable hash of ``id``.
        limit: Keep only the first ``limit`` records of the split.
        include_unanswerable: Keep records with ``"answerable": false``.

    Returns:
        The episodes.

    Raises:
        ValueError: On a line that is not valid JSON (reported with its line number).
    """
    check_split(split)
    records = []
    with Path(path).open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{line_no}: invalid JSON: {err.msg}") from err
            if include_unanswerable or record.get("answerable", True):
                records.append(record)
    kept = filter_split(records, split, lambda r: str(r["id"]), limit)
    return [musique_episode(r) for r in kept]
