"""The lexical gate: a learned rule for whether a later step fuses BM25 of the whole question.

After the first pick, a multi-hop question's next fact mostly names no question word, and BM25 of
the question pulls the search back to chunks like the first pick; a single-hop question whose
answer was missed needs exactly that pull. The two look alike to a fixed rule (a gap between Q's
two best, the share of question words the picks name), but not to a few numbers read together:
how flat Q's best five are above all (a missed single-hop answer leaves them near-flat), Q's best,
its lead over the next, how many of the pool's chunks still name a question word no pick names,
and whether the chunk that fusing would pick is one of them. The gate is a logistic model over that evidence (:data:`GATE_FEATURES`); where it opens, the
step fuses BM25 of the whole question as the first steps do, else the later-step rules apply.

Its weights are learned, not set: ``qrag-fit-gate`` (:mod:`qrag_training.lexical_gate`) records the
evidence at the later steps of the checkpoint's own searches over training questions, labels each
step by whether fusing would pick a missing supporting chunk where the rules do not (or the
reverse), and fits the model to those steps. A checkpoint carries the result in its config
(``QRAGConfig.lexical_gate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: What the gate reads at a later step, in the order of its weights (:func:`gate_evidence`):
#: the step number, Q's best minus the next, Q's best, Q's best minus the fifth, the share and
#: count of the pool's chunks that name a question word no pick names, and whether the pick with
#: the whole question fused is one of them.
GATE_FEATURES = (
    "step",
    "q_margin",
    "q_best",
    "q_spread",
    "novel_share",
    "novel_count",
    "fused_novel",
)

#: Q's best minus its ``SPREAD``-th best is the ``q_spread`` feature.
SPREAD = 5


def gate_evidence(
    step: int, q_values: Sequence[float], novel: np.ndarray, fused: int
) -> np.ndarray:
    """The :data:`GATE_FEATURES` of one question at step ``step``: ``q_values`` are Q of its pool
    (Q's best untaken, best first, at least two), ``novel[i]`` whether pool chunk ``i`` names a
    question word that no pick names, ``fused`` the pool index of the pick with the whole
    question fused."""
    q = np.asarray(q_values, dtype=np.float64)
    named = np.asarray(novel, dtype=bool)
    spread = q[0] - q[min(SPREAD, len(q)) - 1]
    features = [step, q[0] - q[1], q[0], spread, named.mean(), named.sum(), named[fused]]
    return np.array(features, dtype=np.float64)


@dataclass(frozen=True)
class LexicalGate:
    """A logistic gate over :data:`GATE_FEATURES`: it opens where ``bias + weights . evidence >
    0`` (:meth:`opens`)."""

    weights: tuple[float, ...]
    """One weight per feature of :data:`GATE_FEATURES`, in that order."""
    bias: float
    """The gate's intercept."""

    def __post_init__(self) -> None:
        if len(self.weights) != len(GATE_FEATURES):
            raise ValueError(
                f"lexical_gate needs {len(GATE_FEATURES)} weights ({', '.join(GATE_FEATURES)}), "
                f"got {len(self.weights)}"
            )
        if not all(math.isfinite(w) for w in (*self.weights, self.bias)):
            raise ValueError(f"lexical_gate weights and bias must be finite, got {self!r}")

    def score(self, evidence: np.ndarray) -> float:
        """The gate's logit for ``evidence`` (:func:`gate_evidence`)."""
        return float(np.dot(self.weights, evidence) + self.bias)

    def opens(self, evidence: np.ndarray) -> bool:
        """Whether the step fuses BM25 of the whole question."""
        return self.score(evidence) > 0

    def to_dict(self) -> dict[str, Any]:
        """The form saved in a checkpoint's config (features named, so a reader can check them)."""
        return {"features": list(GATE_FEATURES), "weights": list(self.weights), "bias": self.bias}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LexicalGate:
        """Read :meth:`to_dict`'s form.

        Raises:
            ValueError: other features than :data:`GATE_FEATURES` (a gate fitted by another
                version: fit it again with ``qrag-fit-gate``), or weights that are not numbers.
        """
        features = tuple(data.get("features", ())) if isinstance(data, Mapping) else None
        if features is None:
            raise ValueError(f"lexical_gate must be a mapping, got {type(data).__name__}")
        if features != GATE_FEATURES:
            raise ValueError(
                f"lexical_gate reads {list(features)}, this version reads {list(GATE_FEATURES)}: "
                "fit the gate again with qrag-fit-gate"
            )
        try:
            weights = tuple(float(w) for w in data["weights"])
            bias = float(data["bias"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"lexical_gate needs numeric 'weights' and 'bias': {err}") from None
        return cls(weights, bias)
