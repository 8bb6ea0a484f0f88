"""The small bAbI-like corpus the ``QRAGRetriever`` tests share, and a builder over it.

Importable as ``retriever_corpus`` from any test: ``tests/conftest.py`` puts ``tests/`` on
``sys.path`` (pytest's default ``prepend`` import mode, no ``tests/__init__.py``). Tests that
need a different corpus (a subset, extra chunks) derive it from ``BABI_TEXTS`` in their own
module so the difference stays visible there; metadata differs per module (each filters on
its own keys), so it stays local too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qrag_integrations import QRAGRetriever

#: Ten one-sentence chunks, in a fixed order (tests slice and index it).
BABI_TEXTS: tuple[str, ...] = (
    "Mary moved to the bathroom.",
    "Sandra journeyed to the bedroom.",
    "John picked up the football.",
    "Mary went back to the kitchen.",
    "Daniel travelled to the office.",
    "John went to the garden.",
    "Sandra went to the hallway.",
    "Daniel picked up the milk.",
    "The sky is blue.",
    "Fred dropped the apple.",
)

#: Questions about ``BABI_TEXTS``; tests that need fewer take a prefix.
BABI_QUESTIONS: tuple[str, ...] = (
    "Where is the football?",
    "Where is Mary?",
    "What did Daniel pick up?",
    "Where is Sandra?",
    "Who dropped the apple?",
    "Where did John go?",
    "What colour is the sky?",
    "Where is the milk?",
)


def chunk_ids(texts: Sequence[str]) -> list[str]:
    """``["c0", "c1", ...]``, one id per text."""
    return [f"c{i}" for i in range(len(texts))]


def build_retriever(
    checkpoint: str | Path, texts: Sequence[str] = BABI_TEXTS, **kwargs: Any
) -> QRAGRetriever:
    """``QRAGRetriever.from_texts`` over a copy of ``texts`` with the given checkpoint folder."""
    return QRAGRetriever.from_texts(list(texts), checkpoint=str(checkpoint), **kwargs)
