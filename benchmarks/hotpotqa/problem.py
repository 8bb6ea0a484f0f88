"""A HotpotQA retrieval problem: questions, their candidate paragraphs (own or pooled), gold ones."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from qrag_training.data.episode import Episode


@dataclasses.dataclass
class Problem:
    """One setting: questions, the candidate paragraphs of each, and the gold ones."""

    questions: list[str]
    texts: list[str]
    """Every distinct paragraph text of the setting."""
    candidates: list[list[int]] | None
    """Per question: its paragraphs (indices into ``texts``); ``None`` = all of ``texts``."""
    gold: list[set[int]]


def build_problem(episodes: Sequence[Episode], pooled: bool) -> Problem:
    text_id: dict[str, int] = {}
    cands, gold = [], []
    for e in episodes:
        ids = [text_id.setdefault(t, len(text_id)) for t in e.chunks]
        cands.append(list(dict.fromkeys(ids)))
        gold.append({ids[i] for i in e.support})
    return Problem([e.question for e in episodes], list(text_id), None if pooled else cands, gold)
