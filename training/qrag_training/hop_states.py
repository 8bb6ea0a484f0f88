"""The states the next-hop warm start trains: the gold-prefix states a policy passes through when
it picks a question's supporting chunks, and recovery states after a wrong first pick."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from qrag_training.data.episode import Episode


@dataclass
class HopState:
    """One training state: an episode, the supporting chunks picked so far, the ones left."""

    episode: int
    """Index of the episode in the step's batch."""
    picked: list[int]
    """Chunks already picked, in pick order."""
    targets: list[int]
    """Supporting chunks not yet picked (the positives)."""


def hop_states(
    supports: Sequence[Sequence[int]], per_question: int, rng: np.random.Generator
) -> list[HopState]:
    """The first ``per_question`` hop states of each episode, golds in a random order.

    Episodes without supporting chunks give no state.
    """
    out: list[HopState] = []
    for i, support in enumerate(supports):
        gold = [int(g) for g in support]
        if not gold:
            continue
        order = [gold[j] for j in rng.permutation(len(gold))]
        for t in range(min(per_question, len(order))):
            out.append(HopState(i, order[:t], order[t:]))
    return out


def recovery_states(
    episodes: Sequence[Episode], share: float, rng: np.random.Generator
) -> list[HopState]:
    """For a random ``share`` of the episodes with supporting chunks and at least one other chunk,
    the state after a wrong first pick: one non-supporting chunk drawn at random (after
    negative sampling, most often one the base encoder ranks high) is picked, and every
    supporting chunk is a positive.

    A policy trained on gold-prefix states only learns to follow its last pick; on a single-hop
    question whose first pick missed, that walks away from the answer. These states teach the
    step after a miss to look for the question's evidence again.
    """
    out: list[HopState] = []
    for i, episode in enumerate(episodes):
        gold = {int(g) for g in episode.support}
        others = [j for j in range(len(episode.chunks)) if j not in gold]
        if not gold or not others or rng.random() >= share:
            continue
        wrong = others[int(rng.integers(len(others)))]
        out.append(HopState(i, [wrong], sorted(gold)))
    return out


def last_pick_positions(
    states: Sequence[HopState], offsets: np.ndarray, fixed: torch.Tensor
) -> torch.Tensor:
    """``(len(states),)`` fixed position of each state's latest pick (0 before any: no
    rotation), from ``fixed``, the positions of a step's chunks whose episode ``i`` starts at
    row ``offsets[i]`` (``QRAGModel.place_states``)."""
    return torch.tensor(
        [int(fixed[offsets[s.episode] + s.picked[-1]]) if s.picked else 0 for s in states],
        dtype=torch.long,
    )
