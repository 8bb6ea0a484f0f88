"""Sampled negatives for the next-hop loss: a question's supporting chunks, the other chunks its
base encoder ranks highest (hard negatives), optionally those most like each supporting chunk (hop
negatives) and a few drawn at random, instead of every chunk of a long document at every step.

The base encoder's chunk and question embeddings never change, so they are computed once per
text and kept (``D`` floats per text). Sampling keeps the chunks' document order and, in
position modes ``document`` and ``document_relative``, each kept chunk's place in the full episode
(``kept_layout_meta``); modes whose positions follow the rows (``absolute``, ``relative``) are
refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.encoder import MeanPoolEncoder
from qrag_integrations.core.model import QRAGModel
from qrag_training.data.episode import Episode
from qrag_training.documents import kept_layout_meta


def check_negatives_fit(mode: PositionMode, setting: str) -> None:
    """Refuse ``setting`` (a kind of negatives) unless chunks dropped from or added to an episode
    keep their positions in ``mode``: no positions, or positions inside documents (a chunk of
    another episode sits in a document without this state's picks, at its fixed place).

    Raises:
        ValueError: ``mode``'s positions follow the rows (absolute, relative).
    """
    if mode.moves and not mode.in_documents:
        raise ValueError(
            f"{setting} needs position_mode none, document or document_relative, got {mode.value}"
        )


#: Texts -> ``(len(texts), D)`` L2-normalised base-encoder embeddings.
Embed = Callable[[Sequence[str]], torch.Tensor]


class NegativeSampler:
    """Shrinks episodes to their supporting chunks plus ``hard`` + ``hop`` per supporting chunk +
    ``random`` negatives."""

    def __init__(
        self,
        embed_chunks: Embed,
        embed_questions: Embed,
        hard: int,
        random: int = 0,
        hop: int = 0,
    ) -> None:
        """Args:
        embed_chunks: the base encoder's chunk embeddings (normalised).
        embed_questions: the base encoder's question embeddings (normalised).
        hard: negatives kept by the base encoder's cosine ranking, highest first.
        random: negatives drawn uniformly from the rest.
        hop: per supporting chunk, the other chunks whose embeddings are closest to its own
            (a story's other moves of the person a gold fact names: what a state that holds
            that fact must not pick), highest first.
        """
        if hard < 0 or random < 0 or hop < 0 or hard + random + hop < 1:
            raise ValueError(
                "hard, random and hop negatives must be >= 0, one of them > 0: "
                f"{hard}, {random}, {hop}"
            )
        self.embed_chunks, self.embed_questions = embed_chunks, embed_questions
        self.hard, self.random, self.hop = hard, random, hop
        self._chunks: dict[str, torch.Tensor] = {}
        self._questions: dict[str, torch.Tensor] = {}

    def __call__(self, episodes: Sequence[Episode], rng: np.random.Generator) -> list[Episode]:
        """The episodes with only the kept chunks (those with few enough chunks unchanged)."""
        long = [e for e in episodes if len(e.chunks) - len(set(e.support)) > self._keeps(e)]
        self._embed(self._chunks, self.embed_chunks, [c for e in long for c in e.chunks])
        self._embed(self._questions, self.embed_questions, [e.question for e in long])
        shrink = {id(e) for e in long}
        return [self._sample(e, rng) if id(e) in shrink else e for e in episodes]

    def _keeps(self, episode: Episode) -> int:
        """How many negatives ``episode`` keeps at most."""
        return self.hard + self.random + self.hop * len(set(episode.support))

    def _sample(self, episode: Episode, rng: np.random.Generator) -> Episode:
        gold = set(episode.support)
        others = [i for i in range(len(episode.chunks)) if i not in gold]
        question = self._questions[episode.question]
        emb = torch.stack([self._chunks[episode.chunks[i]] for i in others])
        ranked = [others[int(j)] for j in torch.argsort(emb @ question, descending=True)]
        kept = set(ranked[: self.hard])
        for g in gold if self.hop else ():
            near = torch.argsort(emb @ self._chunks[episode.chunks[g]], descending=True)
            kept |= {others[int(j)] for j in near[: self.hop]}
        rest = [i for i in ranked if i not in kept]
        if self.random and rest:
            kept |= {
                rest[int(j)]
                for j in rng.choice(len(rest), min(self.random, len(rest)), replace=False)
            }
        rows = sorted(gold | kept)
        new = {old: i for i, old in enumerate(rows)}
        return Episode(
            id=episode.id,
            question=episode.question,
            chunks=[episode.chunks[i] for i in rows],
            support=[new[i] for i in episode.support],
            answer=episode.answer,
            titles=None if episode.titles is None else [episode.titles[i] for i in rows],
            meta=kept_layout_meta(episode, rows),  # positions stay those of the full episode
        )

    @staticmethod
    def _embed(cache: dict[str, torch.Tensor], embed: Embed, texts: list[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in cache]
        if new:
            with torch.no_grad():
                cache.update(zip(new, embed(new).float().cpu()))


def base_encoder_sampler(
    model: QRAGModel,
    encoder: MeanPoolEncoder,
    hard: int,
    random: int,
    hop: int,
    batch_size: int,
) -> NegativeSampler:
    """A :class:`NegativeSampler` ranking by ``encoder`` (the base encoder) with ``model``'s
    tokenizer and token budgets.

    Raises:
        ValueError: ``model``'s positions follow the rows (absolute, relative).
    """
    cfg = model.config
    check_negatives_fit(cfg.position_mode, "hard_negatives")
    return NegativeSampler(
        lambda texts: model.encode_in_length_batches(
            encoder, texts, cfg.max_chunk_tokens, batch_size
        ),
        lambda texts: encoder(**model.tokenize(list(texts), cfg.max_state_tokens)),
        hard,
        random,
        hop,
    )
