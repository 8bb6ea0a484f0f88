"""Supervised next-hop warm start for Q-RAG (our addition to the paper, which trains with PQN only).

For a question with supporting chunks ``g_1..g_m`` (shuffled), the states the policy passes
through when it picks them are ``question``, ``question [SEP] g_1``, ... . Each of these states
is trained with a cross-entropy over the chunks not yet picked, whose positive class is *any*
remaining supporting chunk (``-log sum_{g remaining} p(g)``), with
``p = softmax(Q(s, .) / temperature)``. Q is the same ``Q1 + Q2`` the search takes the arg-max
of, so what this learns is exactly what greedy retrieval uses. Negatives are the episode's other
chunks (HotpotQA: the 8 distractor paragraphs) and, with ``in_batch_negatives``, every chunk of
the other questions in the step, which is what a pooled index asks for.

It learns in minutes on a CPU where PQN, starting from random-looking Q-values, needs hours; the
resulting checkpoint is a normal Q-RAG checkpoint that PQN can continue from (``init_from``).
Every shipped checkpoint (the general default, the HotpotQA checkpoint, the BabiLong demo) was
trained by this learner alone (``algo.kind = next_hop``; recipes ``preset=general_gpu``,
``preset=hotpotqa_gpu``, ``preset=babi_gpu``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.precision import bf16_autocast
from qrag_training.data.episode import Episode
from qrag_training.distill import (
    INIT,
    TEACHERS,
    BaseTeacher,
    Teacher,
    base_teacher,
    distill_loss,
    make_teacher,
)
from qrag_training.distributed import DistContext
from qrag_training.documents import positions_for
from qrag_training.frozen_cache import FrozenLayerCache
from qrag_training.hop_states import HopState, hop_states, last_pick_positions, recovery_states
from qrag_training.learner import Learner
from qrag_training.negatives import NegativeSampler, base_encoder_sampler, check_negatives_fit
from qrag_training.optim import OptimConfig


@dataclass
class NextHopConfig(OptimConfig):
    """Hyperparameters of the supervised next-hop warm start (optimiser fields:
    :class:`~qrag_training.optim.OptimConfig`)."""

    questions_per_step: int = 8
    """Episodes per optimiser step."""
    temperature: float = 0.05
    """Softmax temperature over Q-values (cosine Q with ``normalize``: 0.05 as in contrastive
    sentence-embedding training)."""
    states_per_question: int = 2
    """How many of a question's hop states (``question``, ``question + g_1``, ...) are trained
    per step; the first ones in the sampled order are taken."""
    in_batch_negatives: bool = True
    """Also score every chunk of the step's other questions as negatives (position modes ``none``,
    ``document``, ``document_relative``: they keep their fixed place; row-based modes refuse)."""
    distill_weight: float = 0.0
    """Weight of a term that keeps first-pick scores close to a frozen teacher's: at each
    question-only state, KL(teacher || policy) over the same chunks, with the teacher's
    distribution ``softmax(scores / distill_temperature)``. It keeps what the teacher knows about
    single-hop relevance while the supervised loss teaches the hops; 0 turns it off (no teacher
    is built)."""
    distill_temperature: float = 0.05
    """Softmax temperature of the teacher's scores."""
    distill_teacher: str = "base"
    """Whose scores (:mod:`qrag_training.distill`): ``base``, the untrained base encoder's cosines;
    ``init``, the question-only Q-values of the model as the run starts (a continuation from
    ``init_from`` keeps its own first pick)."""
    recovery_states: float = 0.0
    """Share of questions that also train a state after a wrong first pick (the question and one
    of the episode's other chunks; positives: every supporting chunk), so later picks go back to
    the question after a miss instead of following it (:func:`~qrag_training.hop_states.recovery_states`);
    0 = gold-prefix states only."""
    anchor_states: bool = False
    """Train the states after the first pick as the search scores them, anchored to the question
    (``QRAGModel.anchor_states`` with ``model.question_weight``); ``False`` trains ``E_s(state)``
    alone. No effect when the weight is 0."""
    freeze_chunk_encoder: bool = False
    """Train the state encoder only: chunk embeddings stay those of the starting weights, so a
    continuation moves where states point, never where a user's chunks sit."""
    frozen_cache_mb: float = 0.0
    """Keep the output of the chunk encoder's frozen layers per chunk text, up to this many MB
    (:mod:`qrag_training.frozen_cache`), so a step runs only the trainable layers on chunks seen
    before; 0 = off. Needs ``model.trainable_layers`` unless ``freeze_chunk_encoder``."""
    hard_negatives: int | None = None
    """Train each question on its supporting chunks, this many other chunks its base encoder
    ranks highest and ``random_negatives`` more at random (:mod:`qrag_training.negatives`);
    ``None`` = every chunk of the episode. Needs fixed positions (mode ``none`` or ``document``)."""
    random_negatives: int = 0
    """Negatives drawn at random per question besides the hard ones (with ``hard_negatives``)."""
    hop_negatives: int = 0
    """Per supporting chunk, this many other chunks most like it to the base encoder are kept
    too (with ``hard_negatives``; without, every chunk is kept): the confusers after a pick."""

    @property
    def distills_toward_start(self) -> bool:
        """Whether the distillation teacher is the weights the run started from."""
        return self.distill_weight > 0 and self.distill_teacher == INIT

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.questions_per_step < 1:
            raise ValueError(f"questions_per_step must be >= 1, got {self.questions_per_step}")
        if self.states_per_question < 1:
            raise ValueError(f"states_per_question must be >= 1, got {self.states_per_question}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.distill_weight < 0:
            raise ValueError(f"distill_weight must be >= 0, got {self.distill_weight}")
        if self.distill_temperature <= 0:
            raise ValueError(f"distill_temperature must be > 0, got {self.distill_temperature}")
        if self.distill_teacher not in TEACHERS:
            raise ValueError(
                f"distill_teacher must be one of {TEACHERS}, got {self.distill_teacher!r}"
            )
        if not 0.0 <= self.recovery_states <= 1.0:
            raise ValueError(f"recovery_states must be in [0, 1], got {self.recovery_states}")
        if self.frozen_cache_mb < 0:
            raise ValueError(f"frozen_cache_mb must be >= 0, got {self.frozen_cache_mb}")
        if self.hard_negatives is not None and self.hard_negatives < 0:
            raise ValueError(f"hard_negatives must be >= 0 or null, got {self.hard_negatives}")
        if self.random_negatives < 0:
            raise ValueError(f"random_negatives must be >= 0, got {self.random_negatives}")


def next_hop_loss(
    q: torch.Tensor, available: torch.Tensor, positive: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Mean over rows of ``-log sum_{positive} softmax(q / temperature)`` among available entries.

    Args:
        q: ``(S, N)`` Q-values.
        available: ``(S, N)`` bool, candidates of each row (positives included).
        positive: ``(S, N)`` bool, the right answers of each row.
        temperature: softmax temperature.
    """
    logits = (q.float() / temperature).masked_fill(~available, float("-inf"))
    all_ = torch.logsumexp(logits, dim=-1)
    pos = torch.logsumexp(logits.masked_fill(~(positive & available), float("-inf")), dim=-1)
    return (all_ - pos).mean()


def in_batch_candidates(texts: Sequence[str], lo: int, hi: int) -> torch.Tensor:
    """``(len(texts),)`` bool: the candidates of a question whose own chunks are ``texts[lo:hi]``
    among all chunks of the step: its own, and every other question's chunk that is not a copy
    of one of its own (questions about one document share chunks; such a copy may be this
    question's answer, so it is no negative)."""
    own = set(texts[lo:hi])
    out = torch.tensor([t not in own for t in texts], dtype=torch.bool)
    out[lo:hi] = True
    return out


def frozen_chunk_cache(
    model: QRAGModel, max_mb: float, whole: bool = False
) -> FrozenLayerCache | None:
    """The chunk encoder's frozen-layer cache of ``max_mb`` MB (``None`` for 0, or when no
    layer is frozen); ``whole``: every layer is frozen (``freeze_chunk_encoder``), so the cache
    holds final outputs, computed once in eval mode (no dropout on a frozen encoder)."""
    if max_mb <= 0:
        return None
    trainable = 0 if whole else model.config.trainable_layers
    if trainable is None:
        raise ValueError(
            "frozen_cache_mb needs model.trainable_layers: only frozen layers are cached"
        )
    frozen = len(model.chunk_encoder.layers()) - trainable
    if frozen < 1:
        return None
    return FrozenLayerCache(
        model.chunk_encoder, frozen, model.tokenize, model.config.max_chunk_tokens, max_mb
    )


class NextHopLearner(Learner):
    """Online model, optimiser and schedule of the supervised warm start: the learner of every
    shipped checkpoint.

    What :class:`~qrag_training.trainer.Trainer` needs from a learner (``updates``, ``lr``,
    ``optimizer``, ``scalars``, target tensors: none) is :class:`~qrag_training.learner.Learner`'s;
    ``env_steps`` counts the hop states trained, over all ranks.
    """

    config: NextHopConfig

    def __init__(
        self,
        model: QRAGModel,
        config: NextHopConfig,
        seed: int = 0,
        dist: DistContext | None = None,
        start: QRAGModel | None = None,
    ) -> None:
        if config.in_batch_negatives:
            check_negatives_fit(model.config.position_mode, "in_batch_negatives")
        if config.freeze_chunk_encoder:  # before the optimiser collects the trainable parameters
            model.chunk_encoder.requires_grad_(False)
        super().__init__(model, config, seed, dist)
        self.teacher: Teacher | None = (
            make_teacher(config.distill_teacher, model, start)
            if config.distill_weight > 0
            else None
        )
        """The frozen teacher of the distillation term (``None`` when it is off)."""
        self.chunk_cache = frozen_chunk_cache(
            model, config.frozen_cache_mb, config.freeze_chunk_encoder
        )
        """Output of the chunk encoder's frozen layers per text (``None``: off)."""
        self.sampler = self._sampler() if config.hard_negatives is not None else None
        """Shrinks each step's episodes to sampled negatives (``None``: every chunk)."""

    def _sampler(self) -> NegativeSampler:
        c = self.config
        # negatives are the ones the base encoder ranks highest, whichever teacher distils
        teacher = self.teacher
        encoder = teacher.encoder if isinstance(teacher, BaseTeacher) else base_teacher(self.model)
        return base_encoder_sampler(
            self.model,
            encoder,
            c.hard_negatives or 0,
            c.random_negatives,
            c.hop_negatives,
            c.embed_batch_size,
        )

    def step(self, next_episode: Callable[[], Episode]) -> dict[str, float]:
        """One optimiser step on ``questions_per_step`` episodes; returns loss, accuracy, grad norm."""
        c, model = self.config, self.model
        episodes = [next_episode() for _ in range(c.questions_per_step)]
        if self.sampler is not None:
            with bf16_autocast(model.device, self.bf16):
                episodes = self.sampler(episodes, self.rng)
        states = hop_states([e.support for e in episodes], c.states_per_question, self.rng)
        if c.recovery_states > 0:
            states += recovery_states(episodes, c.recovery_states, self.rng)
        if not states:
            raise ValueError("no training episode in this step has supporting chunks")
        sizes = [len(e.chunks) for e in episodes]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        total = int(offsets[-1])
        model.train(c.dropout)
        if c.freeze_chunk_encoder:  # no dropout on an encoder that does not learn
            model.chunk_encoder.eval()
        cfg = model.config
        texts_of_step = [t for e in episodes for t in e.chunks]
        texts = [
            model.state_text(
                episodes[s.episode].question,
                [episodes[s.episode].chunks[j] for j in s.picked],
                s.picked,
            )
            for s in states
        ]
        with bf16_autocast(model.device, self.bf16):
            chunk_emb = (
                self.chunk_cache.embed(texts_of_step)
                if self.chunk_cache is not None
                else model.embed_chunks_grad(texts_of_step)
            )
            state_emb = model.embed_states(texts)
            if c.anchor_states and cfg.question_weight > 0:
                state_emb = self._anchored(episodes, states, state_emb)
        available = torch.zeros(len(states), total, dtype=torch.bool, device=model.device)
        positive = torch.zeros_like(available)
        fixed = torch.from_numpy(np.concatenate([positions_for(e, cfg, []) for e in episodes]))
        # moving positions: a document without the state's picks (another episode's) stays fixed
        positions = (
            fixed.to(model.device).repeat(len(states), 1) if cfg.position_mode.moves else None
        )
        for row, s in enumerate(states):
            lo, hi = int(offsets[s.episode]), int(offsets[s.episode + 1])
            if c.in_batch_negatives:
                available[row] = in_batch_candidates(texts_of_step, lo, hi).to(model.device)
            else:
                available[row, lo:hi] = True
            available[row, [lo + j for j in s.picked]] = False
            positive[row, [lo + j for j in s.targets]] = True
            if positions is not None:
                pos = positions_for(episodes[s.episode], cfg, s.picked)
                positions[row, lo:hi] = torch.from_numpy(pos).to(model.device)
        if positions is None:  # fixed positions: one rotated copy serves every state
            state_emb = model.place_states(state_emb, last_pick_positions(states, offsets, fixed))
            q = model.q_values(state_emb, chunk_emb, fixed.to(model.device))
        else:  # per-state positions: rotate a copy of the chunks for every state
            rotated = model.rotate_chunks(
                chunk_emb.unsqueeze(0).expand(len(states), -1, -1), positions
            )
            q1, q2 = model.twin_q(state_emb, rotated)
            q = q1 + q2
        loss = next_hop_loss(q, available, positive, c.temperature)
        hop_loss = loss.detach()
        distill = torch.zeros(())
        if self.teacher is not None:
            first = [row for row, s in enumerate(states) if not s.picked]
            if first:
                distill = distill_loss(
                    q[first],
                    self._teacher_scores(episodes, [states[r] for r in first]),
                    available[first],
                    c.temperature,
                    c.distill_temperature,
                )
                loss = loss + c.distill_weight * distill
        loss.backward()
        norm = self._step_optimizer()
        model.eval()
        self.env_steps += int(self.dist.sum_floats([len(states)])[0])
        with torch.no_grad():
            best = q.detach().masked_fill(~available, float("-inf")).argmax(-1)
            acc = positive.gather(1, best[:, None]).float().mean()
        out = {"loss": float(loss.detach()), "hop_accuracy": float(acc), "grad_norm": float(norm)}
        if self.teacher is not None:
            out.update(hop_loss=float(hop_loss), distill_loss=float(distill.detach()))
        return out

    def _anchored(
        self, episodes: Sequence[Episode], states: Sequence[HopState], state_emb: torch.Tensor
    ) -> torch.Tensor:
        """``state_emb`` with every row after the first pick anchored to its question's
        embedding, as the search scores it (differentiable through both)."""
        later = [row for row, s in enumerate(states) if s.picked]
        if not later:
            return state_emb
        model = self.model
        questions = model.embed_states([episodes[states[r].episode].question for r in later])
        rows = torch.tensor(later, device=state_emb.device)
        anchored = model.anchor_states(state_emb[rows], questions.to(state_emb.dtype))
        return state_emb.index_put((rows,), anchored)

    def _teacher_scores(
        self, episodes: Sequence[Episode], states: Sequence[HopState]
    ) -> torch.Tensor:
        """``(len(states), total chunks)`` teacher scores of each state's question against every
        chunk of the step (the question-only states' teacher)."""
        assert self.teacher is not None
        return self.teacher.scores(
            self.model,
            [episodes[s.episode].question for s in states],
            [t for e in episodes for t in e.chunks],
            self.config.embed_batch_size,
        )
