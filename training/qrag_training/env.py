"""Retrieval episodes as an RL environment (single and vectorised).

The MDP of the Q-RAG paper (Sorokin et al., ICLR 2026): the state is the question plus the
chunks picked so far; an action picks one chunk that is not picked yet; chunk positions are
re-laid out after every pick (:func:`qrag_integrations.core.positions.layout`). Reaching ``max_steps`` picks is a
*truncation*; running out of chunks, or the feedback declaring the episode solved when it may
terminate, is a *termination*. The two flags are kept apart so the returns bootstrap correctly.

:class:`VectorEnv` steps ``B`` environments in lock-step with auto-reset. Chunk embeddings
(online and target) are computed once per episode, when it starts, and only re-rotated for the
current positions at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_training.data.episode import Episode
from qrag_training.distributed import stripe
from qrag_training.documents import positions_for
from qrag_training.feedback import Feedback, RewardQuery, score_picks

#: ``state_text(question, picked_texts_in_pick_order, picked_document_order) -> str``,
#: normally :meth:`qrag_integrations.QRAGModel.state_text`.
StateTextFn = Callable[[str, Sequence[str], Sequence[int]], str]


@dataclass
class EnvSettings:
    """How an episode is played."""

    max_steps: int = 6
    """Picks per episode; reaching it is a truncation (paper: BabiLong 6, HotpotQA 2)."""
    position_mode: PositionMode = PositionMode.RELATIVE
    """Chunk position layout: none, absolute, relative (re-laid out after every pick), document or
    document_relative (:class:`~qrag_integrations.core.config.PositionMode`)."""
    relative_step: int = 20
    """Relative mode: distance between segments."""
    relative_span: float = 0.9
    """Relative mode: fraction of ``relative_step`` a segment spreads over."""

    def __post_init__(self) -> None:
        self.position_mode = PositionMode(self.position_mode)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")

    @classmethod
    def from_model_config(cls, max_steps: int, config: QRAGConfig) -> EnvSettings:
        """Settings whose positions match a model's configuration."""
        return cls(max_steps, config.position_mode, config.relative_step, config.relative_span)


@dataclass
class StepResult:
    """Outcome of one pick."""

    reward: float
    terminated: bool
    """The episode is over for good (no value after it)."""
    truncated: bool
    """The episode was cut off at the step cap (the next state still has a value)."""

    @property
    def done(self) -> bool:
        """Either flag."""
        return self.terminated or self.truncated


class RetrievalEnv:
    """One retrieval episode at a time: question, chunks, picks, mask and positions."""

    def __init__(self, settings: EnvSettings, feedback: Feedback, state_text: StateTextFn) -> None:
        self.settings = settings
        self.feedback = feedback
        self._state_text = state_text
        self.episode: Episode | None = None
        self.picked: list[int] = []
        """Picked chunk indices, in pick order."""
        self.mask = np.zeros(0, dtype=bool)
        """``True`` where a chunk can still be picked."""
        self.positions = np.zeros(0, dtype=np.int64)
        """Current position of every chunk (document order)."""
        self.episode_return = 0.0

    @property
    def num_chunks(self) -> int:
        """Chunks in the current episode."""
        return 0 if self.episode is None else len(self.episode.chunks)

    @property
    def steps(self) -> int:
        """Picks made in the current episode."""
        return len(self.picked)

    def _layout(self) -> np.ndarray:
        assert self.episode is not None
        return positions_for(self.episode, self.settings, self.picked)

    def reset(self, episode: Episode) -> str:
        """Start ``episode``; returns the initial state text."""
        if not episode.chunks:
            raise ValueError(f"episode {episode.id!r} has no chunks")
        if self.feedback.requires_support and not episode.support:
            raise ValueError(
                f"episode {episode.id!r} has no supporting facts; the feedback needs them"
            )
        self.episode = episode
        self.picked = []
        self.mask = np.ones(len(episode.chunks), dtype=bool)
        self.positions = self._layout()
        self.episode_return = 0.0
        return self.state_text()

    def state_text(self) -> str:
        """Question plus picked chunks, as the state encoder reads it."""
        if self.episode is None:
            raise RuntimeError("call reset() first")
        texts = [self.episode.chunks[i] for i in self.picked]
        return self._state_text(self.episode.question, texts, list(self.picked))

    def step(self, action: int) -> StepResult:
        """Pick chunk ``action`` (:meth:`pick`, the feedback's reward, :meth:`settle`)."""
        query = self.pick(action)
        return self.settle(score_picks(self.feedback, [query])[0])

    def pick(self, action: int) -> RewardQuery:
        """First half of a step: pick chunk ``action`` and return what its reward depends on.

        :class:`VectorEnv` picks in every environment, computes all rewards in one
        :func:`~qrag_training.feedback.score_picks` call, then :meth:`settle` s each environment.
        """
        if self.episode is None:
            raise RuntimeError("call reset() first")
        action = int(action)
        if not 0 <= action < self.num_chunks or not self.mask[action]:
            raise ValueError(f"chunk {action} is not available (picked or out of range)")
        if self.steps >= self.settings.max_steps:
            raise RuntimeError("episode is over; call reset()")
        self.picked.append(action)
        self.mask[action] = False
        self.positions = self._layout()
        return RewardQuery(self.episode, tuple(self.picked), final=self._exhausted or self._capped)

    @property
    def _exhausted(self) -> bool:
        return not self.mask.any()

    @property
    def _capped(self) -> bool:
        return self.steps >= self.settings.max_steps

    def settle(self, reward: float) -> StepResult:
        """Second half of a step: book the reward of the latest pick and say whether it ended
        the episode."""
        if self.episode is None:
            raise RuntimeError("call reset() first")
        solved = not self.feedback.never_terminate and self.feedback.terminal(
            self.episode, self.picked
        )
        terminated = self._exhausted or solved
        truncated = self._capped and not terminated
        self.episode_return += float(reward)
        return StepResult(float(reward), terminated, truncated)


class ChunkEmbedder(Protocol):
    """What :class:`VectorEnv` needs from the agent to keep per-episode chunk embeddings."""

    def embed_chunk_lists(
        self, chunk_lists: Sequence[Sequence[str]]
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Unrotated ``(online, target)`` embeddings ``(N_i, D)`` for each list of chunks."""
        ...

    def rotate(self, emb: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate chunk embeddings ``(..., D)`` by integer positions ``(...)``."""
        ...


@dataclass
class FinalObservation:
    """The last state of an episode that just ended (before auto-reset), for bootstrapping."""

    state_text: str
    mask: np.ndarray
    positions: np.ndarray
    target_chunk_emb: torch.Tensor | None
    """Unrotated target chunk embeddings of the finished episode (``None`` without embedder)."""


@dataclass
class VectorStep:
    """Outcome of one lock-step of all environments."""

    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    action_positions: np.ndarray
    """Position each picked chunk had when it was picked (``(B,)`` int64)."""
    action_texts: list[str]
    finals: list[FinalObservation | None]
    """For environments whose episode ended at this step: its final observation."""
    episode_returns: list[float]
    """Returns of the episodes that ended at this step."""
    episode_solved: list[bool]
    """For those episodes: whether every supporting fact was picked (false without labels)."""


class VectorEnv:
    """``B`` retrieval environments stepped together, each reset automatically when done."""

    def __init__(
        self,
        envs: Sequence[RetrievalEnv],
        source: Callable[[], Episode],
        embedder: ChunkEmbedder | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        if not envs:
            raise ValueError("need at least one environment")
        self.envs = list(envs)
        self.source = source
        self.embedder = embedder
        self.device = torch.device(device)
        self._emb: list[torch.Tensor | None] = [None] * len(self.envs)
        self._emb_target: list[torch.Tensor | None] = [None] * len(self.envs)

    @property
    def num_envs(self) -> int:
        """``B``."""
        return len(self.envs)

    def _start(self, slots: Sequence[int]) -> None:
        episodes = [self.source() for _ in slots]
        for slot, episode in zip(slots, episodes):
            self.envs[slot].reset(episode)
        if self.embedder is not None and slots:
            embedded = self.embedder.embed_chunk_lists([e.chunks for e in episodes])
            for slot, (online, target) in zip(slots, embedded):
                self._emb[slot], self._emb_target[slot] = online, target

    def reset(self) -> list[str]:
        """Start a new episode in every environment; returns the state texts."""
        self._start(list(range(self.num_envs)))
        return self.state_texts()

    def state_texts(self) -> list[str]:
        """Current state text of each environment."""
        return [env.state_text() for env in self.envs]

    def masks(self) -> torch.Tensor:
        """``(B, N_max)`` bool, ``True`` where a chunk can be picked (padding is ``False``)."""
        return pad_sequence(
            [torch.from_numpy(env.mask.copy()) for env in self.envs],
            batch_first=True,
            padding_value=False,
        ).to(self.device)

    def rotated(self, target: bool = False) -> torch.Tensor:
        """``(B, N_max, D)`` chunk embeddings rotated to the current positions (padding is 0)."""
        if self.embedder is None:
            raise RuntimeError("VectorEnv was built without an embedder")
        store = self._emb_target if target else self._emb
        emb = pad_sequence([e for e in store if e is not None], batch_first=True)
        positions = pad_sequence(
            [torch.from_numpy(env.positions) for env in self.envs], batch_first=True
        ).to(emb.device)
        return self.embedder.rotate(emb, positions)

    def _rewards(self, queries: Sequence[RewardQuery]) -> list[float]:
        """Rewards of one pick per environment: one :func:`score_picks` call per feedback object
        (normally all environments share one, so a batching feedback is asked once per step)."""
        groups: dict[int, list[int]] = {}
        for i, env in enumerate(self.envs):
            groups.setdefault(id(env.feedback), []).append(i)
        rewards = [0.0] * len(queries)
        for slots in groups.values():
            values = score_picks(self.envs[slots[0]].feedback, [queries[i] for i in slots])
            for i, value in zip(slots, values):
                rewards[i] = value
        return rewards

    def step(self, actions: Sequence[int] | np.ndarray) -> VectorStep:
        """Apply one action per environment (the rewards of all of them are computed together),
        then reset the environments that finished."""
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        if actions.shape[0] != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {actions.shape[0]}")
        b = self.num_envs
        out = VectorStep(
            rewards=np.zeros(b, dtype=np.float32),
            terminated=np.zeros(b, dtype=bool),
            truncated=np.zeros(b, dtype=bool),
            action_positions=np.zeros(b, dtype=np.int64),
            action_texts=[],
            finals=[None] * b,
            episode_returns=[],
            episode_solved=[],
        )
        queries = []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            assert env.episode is not None
            out.action_positions[i] = env.positions[action]
            out.action_texts.append(env.episode.chunks[action])
            queries.append(env.pick(int(action)))
        finished: list[int] = []
        for i, (env, reward) in enumerate(zip(self.envs, self._rewards(queries))):
            assert env.episode is not None
            result = env.settle(reward)
            out.rewards[i] = result.reward
            out.terminated[i] = result.terminated
            out.truncated[i] = result.truncated
            if result.done:
                out.finals[i] = FinalObservation(
                    env.state_text(), env.mask.copy(), env.positions.copy(), self._emb_target[i]
                )
                out.episode_returns.append(env.episode_return)
                support = set(env.episode.support)
                out.episode_solved.append(bool(support) and support.issubset(env.picked))
                finished.append(i)
        self._start(finished)
        return out


class EpisodeStream:
    """An endless, reproducible stream of training episodes.

    Each pass goes through a pool of episodes in a shuffled order (permutation seeded by
    ``seed + pass``). With ``refresh`` the pool is rebuilt for every pass by ``load(pass)``
    (generators get a new seed, so training rarely sees an episode twice); otherwise the first
    pool is reused. The position in the stream is two integers (:meth:`state_dict`), so a resumed
    run continues exactly where it stopped.

    In a data-parallel run every rank shuffles a pass with the same permutation and reads only
    its stripe of it (:func:`qrag_training.distributed.stripe`), so ranks never share an episode
    within a pass; ``rank=0, world_size=1`` reads the whole permutation.
    """

    def __init__(
        self,
        load: Callable[[int], list[Episode]],
        seed: int,
        refresh: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self._load = load
        self.seed = seed
        self.refresh = refresh
        self.rank, self.world_size = rank, world_size
        self.pass_index = 0
        self.cursor = 0
        self._pool: list[Episode] | None = None
        self._order: np.ndarray | None = None

    def _prepare(self) -> None:
        if self._pool is None or self.refresh:
            self._pool = self._load(self.pass_index if self.refresh else 0)
            if not self._pool:
                raise ValueError("the training data set is empty")
        order = np.random.default_rng(self.seed + self.pass_index).permutation(len(self._pool))
        self._order = np.asarray(stripe(order, self.rank, self.world_size), dtype=order.dtype)
        if not len(self._order):
            raise ValueError(
                f"the training pool ({len(self._pool)} episodes) has none for rank {self.rank} "
                f"of {self.world_size}"
            )

    def __call__(self) -> Episode:
        if self._order is None:
            self._prepare()
        assert self._order is not None and self._pool is not None
        if self.cursor >= len(self._order):
            self.pass_index += 1
            self.cursor = 0
            self._prepare()
        episode = self._pool[int(self._order[self.cursor])]
        self.cursor += 1
        return episode

    def state_dict(self) -> dict[str, int]:
        """Position in the stream."""
        return {"pass_index": self.pass_index, "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a saved position."""
        self.pass_index = int(state["pass_index"])
        self.cursor = int(state["cursor"])
        self._order = None
        if self.refresh:
            self._pool = None
