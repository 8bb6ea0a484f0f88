"""Documents in, checked and deduplicated training lines out (:func:`make_questions`)."""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrag_integrations.core.atomic import write_text_atomic
from qrag_integrations.llm.base import Reader
from qrag_training.questions.corpus import Corpus, build_corpus
from qrag_training.questions.drafts import RULES, TOPIC, Draft, question_problem
from qrag_training.questions.errors import QuestionGenerationError
from qrag_training.questions.lines import LineBuilder
from qrag_training.questions.reader_questions import reader_questions
from qrag_training.questions.rules import bridge_drafts, phrase_frequencies, single_drafts
from qrag_training.questions.settings import QuestionSettings
from qrag_training.questions.sources import as_source_documents
from qrag_training.questions.spans import normalise

logger = logging.getLogger(__name__)


@dataclass
class GenerationReport:
    """What a run wrote and what it dropped, and why."""

    documents: int
    chunks: int
    writer: str
    """``rules`` or the reader's name."""
    written: dict[str, int] = field(default_factory=dict)
    """``<kind>/<side>`` -> lines written."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Reason -> drafts dropped (a reader's question replaced by the rules' counts here too)."""

    @property
    def lines(self) -> int:
        """Lines written in all."""
        return sum(self.written.values())

    def summary(self) -> str:
        """A few lines for a terminal."""
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.written.items()))
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(self.dropped.items())) or "none"
        return (
            f"{self.lines} lines from {self.documents} documents ({self.chunks} chunks), "
            f"questions by {self.writer}\n  written (kind/side): {kinds}\n  dropped: {dropped}"
        )


def _drafts(
    corpus: Corpus, settings: QuestionSettings, reader: Reader | None, rng: random.Random
) -> list[Draft]:
    """The rules' drafts: questions per chunk (topic questions without a reader), then bridges."""
    frequencies = phrase_frequencies(corpus) if reader is None else None
    singles = [
        d
        for c in range(len(corpus.chunks))
        for d in single_drafts(corpus, c, settings.questions_per_chunk, rng, frequencies)
    ]
    limit = int(settings.bridge_share * len(singles))
    bridges = bridge_drafts(corpus, limit, settings.bridge_max_chunks, rng) if limit else []
    return singles + bridges


def _checked(
    drafts: Sequence[Draft],
    corpus: Corpus,
    settings: QuestionSettings,
    reader: Reader | None,
    dropped: Counter[str],
) -> list[Draft]:
    """The drafts that pass :func:`question_problem`; with a reader, its questions in place of
    the rules' (the rules' kept where the reader's fail, with ``rules_fallback``)."""
    if reader is None:
        rewritten: Sequence[Draft | None] = [None] * len(drafts)
    else:
        asked = [d for d in drafts if d.kind != TOPIC]
        drafts = asked
        rewritten = reader_questions(asked, corpus, reader, settings.reader_batch)
    kept = []
    for rules_draft, reader_draft in zip(drafts, rewritten):
        if reader_draft is not None:
            problem = question_problem(reader_draft, corpus)
            if problem is None:
                kept.append(reader_draft)
                continue
            dropped[f"reader: {problem}"] += 1
            if not settings.rules_fallback:
                continue
        problem = question_problem(rules_draft, corpus)
        if problem is None:
            kept.append(rules_draft)
        else:
            dropped[f"rules: {problem}"] += 1
    return kept


def make_questions(
    documents: Iterable[Any],
    settings: QuestionSettings | None = None,
    reader: Reader | None = None,
) -> tuple[list[dict[str, Any]], GenerationReport]:
    """Training lines (custom JSONL objects) from raw documents.

    Args:
        documents: strings, dicts with ``text`` (``id``, ``title`` optional),
            :class:`~qrag_training.questions.sources.SourceDocument`, LangChain Documents or
            LlamaIndex documents / nodes.
        settings: chunking, how many questions, pools, the split (default
            :class:`QuestionSettings`).
        reader: a reader LLM (:func:`qrag_integrations.llm.build_reader`) that writes the
            questions; ``None``: the rules alone (:mod:`qrag_training.questions.rules`).

    Returns:
        The lines, in document order, and the report of what was written and dropped.

    Raises:
        QuestionGenerationError: no text, clashing ids, a failing reader, or no line survived.
    """
    settings = settings or QuestionSettings()
    corpus = build_corpus(as_source_documents(documents), settings)
    rng = random.Random(settings.seed)
    dropped: Counter[str] = Counter()
    drafts = _checked(_drafts(corpus, settings, reader, rng), corpus, settings, reader, dropped)
    builder = LineBuilder(corpus, settings, rng)
    lines: list[dict[str, Any]] = []
    written: Counter[str] = Counter()
    seen: set[str] = set()
    for draft in drafts:
        key = normalise(" ".join(draft.question.replace("?", " ").split()))
        if key in seen:
            dropped["duplicate question"] += 1
            continue
        record = builder.line(draft, f"gen-{len(lines) + 1}")
        if isinstance(record, str):
            dropped[record] += 1
            continue
        seen.add(key)
        lines.append(record)
        written[f"{draft.kind}/{record['meta']['side']}"] += 1
    report = GenerationReport(
        documents=len(corpus.documents),
        chunks=len(corpus.chunks),
        writer=RULES if reader is None else reader.name,
        written=dict(written),
        dropped=dict(dropped),
    )
    if not lines:
        raise QuestionGenerationError(
            f"no question passed the checks ({report.summary()}); the documents may be too short "
            "or lack names and numbers to ask about: a smaller --chunk-size (chunk_size) gives "
            "more chunks to ask about, --reader (an LLM) writes questions the rules cannot"
        )
    return lines, report


def write_lines(path: str | Path, lines: Sequence[dict[str, Any]], overwrite: bool = False) -> None:
    """Write lines as JSONL, atomically (a crash leaves the old file or none).

    Raises:
        QuestionGenerationError: the file exists and ``overwrite`` is false.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise QuestionGenerationError(f"{path} exists; pass --overwrite to replace it")
    write_text_atomic(path, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
