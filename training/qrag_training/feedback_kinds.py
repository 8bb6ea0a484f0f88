"""Building a feedback (the reward source) from its config name: ``ground_truth`` or ``llm``."""

from __future__ import annotations

from typing import Any

from qrag_training.feedback import Feedback, GroundTruthFeedback
from qrag_training.llm_feedback import LLMAnswerFeedback

#: ``feedback.kind`` values.
FEEDBACK_KINDS = ("ground_truth", "llm")


def build_feedback(kind: str, **kwargs: Any) -> Feedback:
    """A feedback by config name: ``ground_truth`` (kwargs go to :class:`GroundTruthFeedback`) or
    ``llm`` (kwargs go to :meth:`LLMAnswerFeedback.from_spec
    <qrag_training.llm_feedback.LLMAnswerFeedback.from_spec>`, which builds the reader)."""
    if kind == "ground_truth":
        return GroundTruthFeedback(**kwargs)
    if kind == "llm":
        return LLMAnswerFeedback.from_spec(**kwargs)
    raise ValueError(f"unknown feedback kind {kind!r}; known: {', '.join(FEEDBACK_KINDS)}")
