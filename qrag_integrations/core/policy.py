"""What the multi-step search does beyond Q's arg-max: the search policy (no framework code).

A :class:`SearchPolicy` holds the rules a search applies at each step: BM25 fusion of the question
(:mod:`~qrag_integrations.core.rules`) and the restatement rule
(:mod:`~qrag_integrations.core.rules`). The same policy runs on every path: an in-memory index
with any scan, FAISS pre-selection, and a vector store. A checkpoint recommends one (the rule
fields of its :class:`~qrag_integrations.core.config.QRAGConfig`, :meth:`SearchPolicy.of`); how
fast a search runs (scan, re-scoring, block size, FAISS) is
:class:`~qrag_integrations.core.search.SearchSettings` (an approximate scan or store changes a pick
only where its candidates miss Q's best).
What the model was trained with (positions, question anchoring, token budgets) stays in its
config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError

#: The restatement margin of ``supersede=True`` for a checkpoint that recommends none (the default
#: checkpoint's, chosen on validation).
DEFAULT_MARGIN = 0.05


def _check_count(name: str, value: int | None, least: int, none: bool) -> None:
    if value is None and none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        also = "None or " if none else ""
        raise QRAGError(f"{name} must be {also}an integer >= {least}, got {value!r}")


def _check_number(name: str, value: float | None, none: bool) -> None:
    if value is None and none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        also = "None or " if none else ""
        raise QRAGError(f"{name} must be {also}a number >= 0, got {value!r}")


@dataclass(frozen=True)
class SearchPolicy:
    """The rules of a search (the same on every path; :meth:`of` gives a checkpoint's)."""

    lexical_depth: int = 0
    """BM25 fusion: re-order Q's best this many by BM25 of the question (reciprocal rank); 0: off."""
    lexical_steps: int | None = None
    """The first steps that always fuse (when ``lexical_depth`` is on); ``None``: every step."""
    lexical_gap: float = 0.0
    """A later step fuses where Q's two best untaken lie within this gap; 0: never."""
    supersede_margin: float | None = None
    """Restatement rule: a later restatement within this much of a pick's Q replaces it; None: off."""
    supersede_similarity: float = 0.8
    """Least cosine of two chunk embeddings for one to restate the other."""
    lexical_weight: float = 0.0
    """Fuse by score, Q + this * BM25 / the question's best BM25; 0: by reciprocal rank."""

    def __post_init__(self) -> None:
        _check_count("lexical_depth", self.lexical_depth, 0, none=False)
        _check_count("lexical_steps", self.lexical_steps, 1, none=True)
        _check_number("lexical_gap", self.lexical_gap, none=False)
        _check_number("lexical_weight", self.lexical_weight, none=False)
        _check_number("supersede_margin", self.supersede_margin, none=True)
        similarity = self.supersede_similarity
        if isinstance(similarity, bool) or not isinstance(similarity, (int, float)):
            raise QRAGError(f"supersede_similarity must be a number, got {similarity!r}")
        if not -1.0 <= similarity <= 1.0:
            raise QRAGError(f"supersede_similarity must be in [-1, 1], got {similarity!r}")

    @classmethod
    def of(
        cls,
        config: QRAGConfig,
        *,
        lexical_depth: int | None = None,
        lexical_steps: int | None = None,
        lexical_gap: float | None = None,
        lexical_weight: float | None = None,
        supersede: bool | None = None,
    ) -> SearchPolicy:
        """The policy ``config``'s checkpoint recommends, with the rules given here changed
        (``None``: the checkpoint's): ``lexical_depth=0`` turns fusion off, ``supersede=False``
        the restatement rule (``True``: on, at the checkpoint's margin, else
        :data:`DEFAULT_MARGIN`).

        Raises:
            QRAGError: a value out of range, or ``supersede`` not a bool or ``None``.
        """
        if not (supersede is None or isinstance(supersede, bool)):
            raise QRAGError(f"supersede must be True, False or None, got {supersede!r}")
        _check_count("lexical_depth", lexical_depth, 0, none=True)
        _check_count("lexical_steps", lexical_steps, 1, none=True)
        _check_number("lexical_gap", lexical_gap, none=True)
        _check_number("lexical_weight", lexical_weight, none=True)
        margin = config.supersede_margin
        if supersede is not None:
            margin = None if not supersede else DEFAULT_MARGIN if margin is None else margin
        return cls(
            lexical_depth=(config.lexical_depth or 0) if lexical_depth is None else lexical_depth,
            lexical_steps=config.lexical_steps if lexical_steps is None else lexical_steps,
            lexical_gap=(config.lexical_gap or 0.0) if lexical_gap is None else lexical_gap,
            lexical_weight=(config.lexical_weight or 0.0)
            if lexical_weight is None
            else lexical_weight,
            supersede_margin=margin,
            supersede_similarity=config.supersede_similarity,
        )

    def replace(self, **changes: Any) -> SearchPolicy:
        """This policy with ``changes`` (field names), checked again."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line per rule, as a retriever shows the policy it searches with."""
        if self.lexical_depth:
            steps = (
                "every step"
                if self.lexical_steps is None
                else f"first {self.lexical_steps} step(s)"
            )
            later = (
                f", later where Q's two best lie within {self.lexical_gap:g}"
                if self.lexical_gap and self.lexical_steps is not None
                else ""
            )
            by = f" by score (weight {self.lexical_weight:g})" if self.lexical_weight else ""
            fusion = f"BM25 fusion{by}: depth {self.lexical_depth}, {steps}{later}"
        else:
            fusion = "BM25 fusion: off"
        if self.supersede_margin is None:
            restate = "restatement rule: off"
        else:
            restate = (
                f"restatement rule: margin {self.supersede_margin:g}, "
                f"cosine >= {self.supersede_similarity:g}"
            )
        return f"{fusion}\n{restate}"
