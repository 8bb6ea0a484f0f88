"""2WikiMultiHopQA loader (the published JSON format).

A file is a JSON list of ``{_id, question, answer, type, evidences,
context: [[title, [sentence, ...]], ...], supporting_facts: [[title, sentence_index], ...]}``,
the same layout as HotpotQA, so records become episodes the same way: one chunk per
paragraph, text ``"<title>: <sentences joined>"``, support = paragraphs whose title is in
``supporting_facts``; ``type`` and ``evidences`` are kept in ``meta``.
"""

from __future__ import annotations

import json
from pathlib import Path

from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import context_episode
from qrag_training.data.splits import ALL, check_split, filter_split

SOURCE_NAME = "twowiki"


def load_twowiki(path: str | Path, split: str = ALL, limit: int | None = None) -> list[Episode]:
    """Load a 2WikiMultiHopQA JSON file (e.g. dev.json) as episodes.

    Args:
        path: The JSON file.
        split: "all", or "train" / "val" / "eval" by the stable hash of ``_id``.
        limit: Keep only the first ``limit`` records of the split.

    Returns:
        The episodes.

    Raises:
        ValueError: For an unknown split or a file that is not a JSON list.
    """
    check_split(split)
    with Path(path).open(encoding="utf-8") as fh:
        records = json.load(fh)
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON list of 2WikiMultiHopQA records")  # noqa: TRY004
    kept = filter_split(records, split, lambda r: str(r["_id"]), limit)
    return [context_episode(r, SOURCE_NAME) for r in kept]
