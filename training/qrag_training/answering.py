"""Reader answers from retrieved chunks: chunk selection, prompts, batched reader calls, metrics.

Shared by ``qrag-eval --reader`` and the LLM-answer reward (:mod:`qrag_training.llm_feedback`):
both give a reader (:class:`qrag_integrations.llm.Reader`) the question and the chosen chunks
in one prompt (:func:`qrag_integrations.llm.build_prompt`, one chunk per line) and score its
answer against the episode's gold answer with the SQuAD / HotpotQA normalisation
(:func:`~qrag_integrations.llm.answer_em`, :func:`~qrag_integrations.llm.answer_f1`), or
for bAbI / BabiLong with BabiLong's label match (:func:`babilong_match`), which accepts a sentence
that names the right label and no other (small readers rarely answer with the bare word).

One prompt serves every data set (:data:`~qrag_integrations.llm.DEFAULT_TEMPLATE`; a file can
replace it). A bAbI prompt asking for "one word only: a place, a person or an object" was tried
with SmolLM2-135M-Instruct and did worse (it answered "A place." and the like): with only the
supporting facts as context, label match on 2 of 8 qa1 questions against 8 of 8 with the default
prompt; with two random distractor sentences added, 5 of 18 against 10 of 18 (qa1 and qa2).

Chunk order in the prompt: ``retrieval`` (default) keeps the order the retriever picked or ranked
them in; ``document`` sorts them by their position in the episode's document (for bAbI stories
the order of events, which the answer depends on).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qrag_integrations.llm import (
    Reader,
    ReaderError,
    answer_em,
    answer_f1,
    build_prompt,
)
from qrag_training.data.babi_world import LOCATIONS, NAMES, OBJECTS
from qrag_training.data.episode import Episode
from qrag_training.metrics import Retrieval

#: Orders the chosen chunks can be given to the reader in.
CHUNK_ORDERS = ("retrieval", "document")
#: Answer metrics an LLM-answer reward can use: exact match, token F1, BabiLong's label match.
ANSWER_METRICS = ("em", "f1", "label")
#: Every answer label of our bAbI tasks (places, people, objects).
BABI_LABELS: tuple[str, ...] = tuple(dict.fromkeys(LOCATIONS + NAMES + OBJECTS))
_FIRST = re.compile(r"first:(\d+)")
_Q_AT_LEAST = re.compile(r"q>=(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


@dataclass(frozen=True)
class ChunkSelection:
    """Which retrieved chunks the reader sees: ``all``, ``first:N`` or ``q>=T``."""

    first: int | None = None
    """Keep only the first ``first`` picks (``None``: no cut)."""
    min_score: float | None = None
    """Keep only the picks whose Q-value is at least this (``None``: no threshold)."""

    @classmethod
    def parse(cls, text: str) -> ChunkSelection:
        """``"all"``, ``"first:N"`` (N >= 0) or ``"q>=T"`` (T a number).

        Raises:
            ValueError: for anything else.
        """
        text = text.strip().replace(" ", "")
        if text == "all":
            return cls()
        if match := _FIRST.fullmatch(text):
            return cls(first=int(match.group(1)))
        if match := _Q_AT_LEAST.fullmatch(text):
            return cls(min_score=float(match.group(1)))
        raise ValueError(f"answer chunks must be all, first:N or q>=T; got {text!r}")

    def choose(self, picked: Sequence[int], scores: Sequence[float]) -> list[int]:
        """The chosen picks, in retrieval order."""
        if self.min_score is not None:
            if len(scores) != len(picked):
                raise ValueError("a Q-value threshold needs one score per pick")
            return [p for p, s in zip(picked, scores) if s >= self.min_score]
        return list(picked if self.first is None else picked[: self.first])

    def __str__(self) -> str:
        if self.first is not None:
            return f"first:{self.first}"
        return "all" if self.min_score is None else f"q>={self.min_score:g}"


def chunk_selection_arg(text: str) -> ChunkSelection:
    """:meth:`ChunkSelection.parse` for ``argparse`` (a bad value is a usage error with the reason)."""
    try:
        return ChunkSelection.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def ordered(ids: Sequence[int], order: str) -> list[int]:
    """Chunk ids in retrieval order (as given) or document order (sorted)."""
    if order not in CHUNK_ORDERS:
        raise ValueError(f"chunk order must be one of {', '.join(CHUNK_ORDERS)}; got {order!r}")
    return sorted(ids) if order == "document" else list(ids)


def episode_prompt(episode: Episode, ids: Sequence[int], template: str) -> str:
    """The reader prompt for ``episode`` with its chunks ``ids`` (in the order given)."""
    return build_prompt(episode.question, [episode.chunks[i] for i in ids], template)


def generate_answers(
    reader: Reader, prompts: Sequence[str], batch_size: int | None = None
) -> list[str]:
    """The reader's answers to ``prompts``, ``batch_size`` prompts per call (``None``: one call).

    Raises:
        ReaderError: the reader failed (its own :class:`ReaderError` passes through; any other
            exception is wrapped with the reader's name) or returned the wrong number of answers
            or a non-string.
    """
    name = getattr(reader, "name", type(reader).__name__)
    size = batch_size or max(1, len(prompts))
    answers: list[str] = []
    for start in range(0, len(prompts), size):
        batch = list(prompts[start : start + size])
        try:
            got = reader.generate(batch)
        except ReaderError:
            raise
        except Exception as err:
            raise ReaderError(
                f"reader {name} failed on a batch of {len(batch)} prompts: {err!r}"
            ) from err
        if not isinstance(got, list) or len(got) != len(batch):
            count = len(got) if isinstance(got, Sequence) else type(got).__name__
            raise ReaderError(f"reader {name} returned {count} answers for {len(batch)} prompts")
        bad = [type(a).__name__ for a in got if not isinstance(a, str)]
        if bad:
            raise ReaderError(f"reader {name} returned a {bad[0]} instead of a string answer")
        answers += got
    return answers


def babilong_match(
    answer: str, gold: str, question: str, labels: Sequence[str] = BABI_LABELS
) -> float:
    """BabiLong's answer metric: 1.0 when the answer's first sentence (lower-cased, up to the
    first ".") names ``gold`` and no other label, labels that the question names not counted."""
    first = answer.lower().split(".")[0]
    asked = {label for label in labels if label in question.lower()}
    named = {label for label in labels if label in first} - asked
    return float(named == {gold.lower()})


def answer_score(answer: str, gold: str, metric: str, question: str = "") -> float:
    """Exact match (``em``), token F1 (``f1``) or BabiLong's label match (``label``) of an
    answer against the gold answer."""
    if metric == "em":
        return answer_em(answer, gold)
    if metric == "f1":
        return answer_f1(answer, gold)
    if metric == "label":
        return babilong_match(answer, gold, question)
    raise ValueError(f"answer metric must be one of {', '.join(ANSWER_METRICS)}; got {metric!r}")


def answer_summary(
    episodes: Sequence[Episode], answers: Sequence[str], label_match: bool = False
) -> dict[str, float]:
    """Mean answer EM / F1 (and with ``label_match`` BabiLong's label match, ``answer_label``)
    over the episodes with a gold answer, and their number."""
    scored = [(a, e) for e, a in zip(episodes, answers) if e.answer is not None]
    n = len(scored)
    metrics = {
        "answer_em": "em",
        "answer_f1": "f1",
        **({"answer_label": "label"} if label_match else {}),
    }
    out: dict[str, float] = {
        key: sum(answer_score(a, str(e.answer), m, e.question) for a, e in scored) / n if n else 0.0
        for key, m in metrics.items()
    }
    out["n_answers"] = n
    return out


def reader_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as keyword arguments (a value is parsed as JSON when it can be)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"reader option must be KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def load_reader(spec: str, options: Mapping[str, Any] | None = None) -> Reader:
    """Build a reader from a spec (``local``, ``local:PATH``, ``openai:BASE_URL#MODEL``,
    ``vllm:MODEL``) with :func:`qrag_integrations.llm.factory.build_reader`, imported here so
    the backends load only when a reader is asked for."""
    from qrag_integrations.llm.factory import build_reader

    return build_reader(spec, **dict(options or {}))


def answer_episodes(
    reader: Reader,
    episodes: Sequence[Episode],
    results: Sequence[Retrieval],
    selection: ChunkSelection,
    template: str,
    order: str = "retrieval",
    batch_size: int | None = None,
) -> tuple[list[list[int]], list[str]]:
    """The reader's answer for every episode from its chosen retrieved chunks.

    Args:
        reader: answers a batch of prompts.
        episodes: the episodes.
        results: what the retriever returned for each.
        selection: which picks the reader sees (all, the first N, Q-value >= T).
        template: prompt template with ``{context}`` and ``{question}``.
        order: ``retrieval`` (pick / rank order) or ``document`` order in the prompt.
        batch_size: prompts per reader call (``None``: all in one call).

    Returns:
        The chunk ids given to the reader (prompt order) and its answer, per episode.
    """
    chosen = [ordered(selection.choose(r.picked, r.scores), order) for r in results]
    prompts = [episode_prompt(e, ids, template) for e, ids in zip(episodes, chosen)]
    return chosen, generate_answers(reader, prompts, batch_size)
