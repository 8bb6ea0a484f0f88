"""The common record every data set in :mod:`qrag_training.data` produces.

An :class:`Episode` is one retrieval problem: a question and the context split into
retrieval units (chunks: sentences for BabiLong / RULER, paragraphs for HotpotQA-style
corpora), in document order, plus the indices of the chunks holding the supporting facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_REQUIRED_KEYS = ("id", "question", "chunks", "support")


@dataclass(frozen=True)
class Episode:
    """One question over a chunked context.

    Attributes:
        id: Stable identifier, unique within a data set.
        question: The question (or query) to retrieve for.
        chunks: The context split into retrieval units, in document order.
        support: Indices into ``chunks`` of the supporting facts; empty for unlabeled data.
        answer: The gold answer, when known.
        titles: Per-chunk title where the source has one (same length as ``chunks``).
        meta: Free-form extra information (task name, target length, source ids, ...).
    """

    id: str
    question: str
    chunks: list[str]
    support: list[int]
    answer: str | None = None
    titles: list[str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> Episode:
        """Check the episode's internal consistency.

        Returns:
            The episode itself, so calls can be chained.

        Raises:
            ValueError: If the chunk list is empty or holds non-strings, a support index is
                not an int, out of range or repeated, the titles list has the wrong length,
                or the question is empty.
        """
        where = f"episode {self.id!r}"
        if not isinstance(self.question, str) or not self.question.strip():
            raise ValueError(f"{where}: question must be a non-empty string")
        if not self.chunks:
            raise ValueError(f"{where}: chunks list is empty")
        for i, chunk in enumerate(self.chunks):
            if not isinstance(chunk, str):
                raise ValueError(f"{where}: chunk {i} is {type(chunk).__name__}, not str")  # noqa: TRY004
        n = len(self.chunks)
        seen: set[int] = set()
        for idx in self.support:
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise ValueError(f"{where}: support index {idx!r} is not an int")  # noqa: TRY004
            if not 0 <= idx < n:
                raise ValueError(
                    f"{where}: support index {idx} out of range for {n} chunks (0..{n - 1})"
                )
            if idx in seen:
                raise ValueError(f"{where}: duplicate support index {idx}")
            seen.add(idx)
        if self.titles is not None and len(self.titles) != n:
            raise ValueError(
                f"{where}: titles has {len(self.titles)} entries but there are {n} chunks"
            )
        return self

    @property
    def supporting_chunks(self) -> list[str]:
        """The texts of the supporting chunks, in ``support`` order."""
        return [self.chunks[i] for i in self.support]

    def to_json(self) -> dict[str, Any]:
        """Convert to a JSON-serialisable dict (lists are copied).

        Returns:
            A dict with the keys id, question, chunks, support, answer, titles, meta.
        """
        return {
            "id": self.id,
            "question": self.question,
            "chunks": list(self.chunks),
            "support": list(self.support),
            "answer": self.answer,
            "titles": None if self.titles is None else list(self.titles),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Episode:
        """Build an episode from a dict produced by :meth:`to_json`.

        Args:
            data: The dict; id, question, chunks and support are required.

        Returns:
            The episode (not validated; call :meth:`validate` if the source is untrusted).

        Raises:
            ValueError: If a required key is missing.
        """
        missing = [k for k in _REQUIRED_KEYS if k not in data]
        if missing:
            raise ValueError(f"episode dict is missing keys: {', '.join(missing)}")
        titles = data.get("titles")
        return cls(
            id=str(data["id"]),
            question=data["question"],
            chunks=list(data["chunks"]),
            support=[int(i) for i in data["support"]],
            answer=data.get("answer"),
            titles=None if titles is None else list(titles),
            meta=dict(data.get("meta") or {}),
        )
