"""Teachers of the next-hop warm start's distillation term: what keeps a policy's first picks
(question-only states) close to a frozen reference ranking while the hop loss teaches later picks.

- ``base``: cosines of the untrained base encoder (what a run from scratch should not forget);
- ``init``: the question-only Q-values of the model as the run starts, a frozen copy of the
  ``init_from`` weights (what a continuation of a trained checkpoint should not forget: its first
  pick, which later training on hop states can pull away from single-hop relevance).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Protocol

import torch

from qrag_integrations.core.encoder import MeanPoolEncoder, load_base
from qrag_integrations.core.model import QRAGModel
from qrag_training.baselines import distinct_text_embedder

BASE, INIT = "base", "init"
#: Names of the teachers ``NextHopConfig.distill_teacher`` takes.
TEACHERS: tuple[str, ...] = (BASE, INIT)


def distill_loss(
    q: torch.Tensor,
    teacher: torch.Tensor,
    available: torch.Tensor,
    temperature: float,
    teacher_temperature: float,
) -> torch.Tensor:
    """Mean over rows of ``KL(softmax(teacher / teacher_temperature) || softmax(q / temperature))``
    among the available entries of each row.

    Args:
        q: ``(S, N)`` policy Q-values.
        teacher: ``(S, N)`` teacher scores.
        available: ``(S, N)`` bool, candidates of each row (at least one per row).
        temperature: softmax temperature of ``q``.
        teacher_temperature: softmax temperature of ``teacher``.
    """
    log_p = torch.log_softmax(
        (q.float() / temperature).masked_fill(~available, float("-inf")), dim=-1
    )
    log_t = torch.log_softmax(
        (teacher.float() / teacher_temperature).masked_fill(~available, float("-inf")), dim=-1
    )
    terms = torch.where(available, log_t.exp() * (log_t - log_p), torch.zeros_like(log_p))
    return terms.sum(-1).mean()


def base_teacher(model: QRAGModel) -> MeanPoolEncoder:
    """The untrained base encoder of ``model`` (cosine, frozen, eval mode) on its device."""
    base, _ = load_base(model.config.base_model)
    teacher = MeanPoolEncoder(base, 1.0, normalize=True).to(model.device)
    teacher.requires_grad_(False)
    return teacher.eval()


class Teacher(Protocol):
    """Scores of questions against chunks, frozen."""

    def scores(
        self, model: QRAGModel, questions: Sequence[str], chunks: Sequence[str], batch: int
    ) -> torch.Tensor:
        """``(len(questions), len(chunks))`` teacher scores (no gradient)."""
        ...


class BaseTeacher:
    """Cosines of the untrained base encoder (``distill_teacher: base``)."""

    def __init__(self, model: QRAGModel) -> None:
        self.encoder = base_teacher(model)

    @torch.no_grad()
    def scores(
        self, model: QRAGModel, questions: Sequence[str], chunks: Sequence[str], batch: int
    ) -> torch.Tensor:
        cfg = model.config
        chunk_emb = model.encode_in_length_batches(
            self.encoder, list(chunks), cfg.max_chunk_tokens, batch
        )
        question_emb = self.encoder(**model.tokenize(list(questions), cfg.max_state_tokens))
        return question_emb.float() @ chunk_emb.float().T


class InitTeacher:
    """Question-only Q-values of a frozen copy of the model as training starts
    (``distill_teacher: init``)."""

    def __init__(self, model: QRAGModel) -> None:
        self.model = copy.deepcopy(model).eval()
        self.model.requires_grad_(False)
        # frozen, so a chunk seen before (bAbI noise, hard negatives) is not encoded again
        self.embed = distinct_text_embedder(self.model)

    @torch.no_grad()
    def scores(
        self, model: QRAGModel, questions: Sequence[str], chunks: Sequence[str], batch: int
    ) -> torch.Tensor:
        frozen = self.model
        states = frozen.embed_states([frozen.state_text(q, [], []) for q in questions])
        chunk_emb = self.embed(list(chunks))
        positions = torch.zeros(len(chunks), dtype=torch.long, device=frozen.device)
        return frozen.q_values(states, chunk_emb, positions).float()


def make_teacher(name: str, model: QRAGModel, start: QRAGModel | None = None) -> Teacher:
    """The teacher called ``name`` (one of :data:`TEACHERS`) for ``model``; ``start``: the weights
    the run started from, which ``init`` copies (default ``model``; a resumed run passes them)."""
    if name == BASE:
        return BaseTeacher(model)
    if name == INIT:
        return InitTeacher(start if start is not None else model)
    raise ValueError(f"distill_teacher must be one of {TEACHERS}, got {name!r}")
