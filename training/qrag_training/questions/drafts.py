"""A question before it becomes a line, and the checks every question passes.

A draft names its chunks (one; two for a bridge question) and, for each, a text inside that
chunk which marks it as support (a sentence). :func:`question_problem` says why a question is
unusable: it is too short or too long, gives its answer (or a bridge question its linking name)
away, or shares too few words with its chunks to be about them (what a broken generation
looks like).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from qrag_training.questions.corpus import Corpus
from qrag_training.questions.spans import contains_phrase, content_words

SINGLE, TOPIC, BRIDGE = "single", "topic", "bridge"
KINDS = (SINGLE, TOPIC, BRIDGE)
RULES = "rules"
MIN_WORDS, MAX_WORDS = 3, 60
_PREFIX = re.compile(r"^\s*(?:\d+[.)]\s*|[-*]\s*|(?:question|q)\s*[:.]\s*)+", re.IGNORECASE)


@dataclass(frozen=True)
class Draft:
    """A question tied to the chunks it came from."""

    kind: str
    """``single`` (one chunk, with an answer), ``topic`` (one chunk, no answer) or ``bridge``."""
    question: str
    answer: str | None
    """The answer, a span of the last chunk (``None`` for a topic question)."""
    chunks: tuple[int, ...]
    """Corpus chunk ids: the one chunk, or a bridge's first hop then the chunk with the answer."""
    support_text: tuple[str, ...]
    """Per chunk, a text inside it (a sentence) that marks it as support."""
    writer: str = RULES
    """``rules`` or the reader's name."""
    name: str | None = None
    """A bridge question's linking name (in both chunks, never in the question)."""

    def with_question(self, question: str, writer: str) -> Draft:
        """The same draft with another question and writer."""
        return replace(self, question=question, writer=writer)


def clean_question(text: str) -> str:
    """A generated question tidied: list marks and ``Question:`` prefixes, quotes and extra
    spaces dropped, a ``?`` at the end."""
    text = _PREFIX.sub("", " ".join(text.split())).strip().strip("\"'“”").strip()
    text = text.rstrip(" .!;:,")
    if text and not text.endswith("?"):
        text += "?"
    return text[:1].upper() + text[1:]


def question_problem(draft: Draft, corpus: Corpus) -> str | None:
    """Why the draft's question is unusable, or ``None`` when it passes every check."""
    words = draft.question.split()
    if len(words) < MIN_WORDS:
        return "question too short"
    if len(words) > MAX_WORDS:
        return "question too long"
    texts = [corpus.chunks[c].text for c in draft.chunks]
    if draft.answer is not None:
        if not contains_phrase(texts[-1], draft.answer):
            return "answer not in its chunk"
        if contains_phrase(draft.question, draft.answer):
            return "answer in the question"
    if draft.name is not None:
        if not all(contains_phrase(t, draft.name) for t in texts):
            return "bridge name not in both chunks"
        if contains_phrase(draft.question, draft.name):
            return "bridge name in the question"
    asked = content_words(draft.question)
    shared = [len(asked & content_words(t)) for t in texts]
    if (len(texts) == 1 and shared[0] < 2) or min(shared) < 1:
        return "question not about its chunks"
    return None
