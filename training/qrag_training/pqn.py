"""PQN-style value learning for Q-RAG: soft-greedy acting, Q(lambda) targets, twin-head loss.

The paper's learner (``algo=pqn``, the config's default), kept as an option: no shipped
checkpoint came from it (all of them came from :mod:`qrag_training.next_hop`, ``algo.kind =
next_hop``); it can continue one (``init_from``).

No replay buffer: ``B`` environments step in parallel for ``T`` steps, the rollout's Q(lambda)
returns are computed backwards from soft values of *target* networks recorded while acting, and
one regression step is taken on the rollout (gradients may be accumulated over several).

* Acting: the online model under ``torch.no_grad``; ``softmax((Q - max Q) / alpha)`` over the
  top-``k`` available chunks; uniform over available chunks for the first ``learning_start``
  environment steps.
* Values: ``V(s) = sum_h alpha * logsumexp(Q_h(s, .) / alpha)`` over the top-``k`` available
  chunks of each head ``h``, from the target state encoder and target chunk embeddings.
* Loss: ``0.5 * MSE(2 Q1, G) + 0.5 * MSE(2 Q2, G)`` with ``Q`` recomputed with gradient through
  both encoders (state text re-encoded, taken chunk re-embedded and rotated by its position at
  that step).
* Optimiser: AdamW, gradient clipping, linear warm-up then linear decay; ``alpha`` follows the
  learning rate (``alpha * lr_t / lr``, floored at ``alpha_min``); Polyak target updates with rate
  ``tau`` after each optimiser step.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from qrag_integrations.core.encoder import MeanPoolEncoder
from qrag_integrations.core.model import QRAGModel, eval_mode
from qrag_integrations.core.precision import bf16_autocast
from qrag_training.distributed import DistContext
from qrag_training.env import FinalObservation, VectorEnv
from qrag_training.learner import Learner
from qrag_training.optim import OptimConfig
from qrag_training.policy import sample_actions, soft_greedy_probs, soft_values, uniform_probs
from qrag_training.returns import q_lambda_returns
from qrag_training.target_forward import forward_online_and_target
from qrag_training.targets import load_target_tensors, polyak_update, target_tensors


@dataclass
class PQNConfig(OptimConfig):
    """Hyperparameters of the PQN learner (defaults: the paper's BabiLong / contriever run, as in
    ``conf/algo/pqn.yaml``; the optimiser fields are :class:`~qrag_training.optim.OptimConfig`'s,
    with the paper's values where they differ from AdamW's usual ones)."""

    betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas (the paper's)."""
    eps: float = 1e-6
    """AdamW epsilon (the paper's)."""
    warmup: int = 1000
    """Optimiser steps of linear learning-rate warm-up (the paper's)."""
    gamma: float = 0.99
    """Discount."""
    lam: float = 0.65
    """Lambda of the Q(lambda) returns."""
    alpha: float = 0.01
    """Temperature of the soft-greedy policy and of the soft values, at full learning rate."""
    alpha_min: float = 1e-4
    """Floor of the annealed temperature (it follows the learning rate, which starts near 0)."""
    tau: float = 0.1
    """Polyak rate of the target encoders, applied after every optimiser step."""
    top_k: int = 5
    """The soft-greedy policy and the soft values use only the top-k available chunks."""
    accumulate_grads: int = 2
    """Rollouts (backward passes) per optimiser step."""
    bootstrap_truncation: bool = False
    """Bootstrap from ``V`` where the step cap cut an episode (a truncation). ``False`` (default)
    ends the return there like a termination (``G = r``), as the reference code does; with
    ``never_terminate`` feedback that anchors the values to the finite horizon (bootstrapping
    drove Q above the maximum return in our CPU runs)."""
    learning_start: int = 400
    """Environment transitions at the start of training acted uniformly at random."""
    micro_batch: int | None = None
    """Split a rollout's loss into pieces of this many transitions (same gradient, less memory)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.accumulate_grads < 1:
            raise ValueError(f"accumulate_grads must be >= 1, got {self.accumulate_grads}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {self.lam}")
        if self.alpha_min <= 0 or self.alpha <= 0:
            raise ValueError("alpha and alpha_min must be > 0")


@dataclass
class Rollout:
    """``T`` lock-steps of ``B`` environments (time-major)."""

    state_texts: list[list[str]]
    """``[T][B]`` state text each action was taken in."""
    action_texts: list[list[str]]
    """``[T][B]`` text of the picked chunk."""
    action_positions: torch.Tensor
    """``(T, B)`` position of the picked chunk at the time it was picked."""
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    next_values: torch.Tensor
    """``(T, B)`` target soft value of each transition's true next state."""
    q_taken: torch.Tensor
    """``(T, B)`` online ``Q1 + Q2`` of the taken action (NaN while acting at random)."""
    episode_returns: list[float] = field(default_factory=list)
    """Returns of the episodes that ended during the rollout."""
    episode_solved: list[bool] = field(default_factory=list)
    """For those episodes: all supporting facts picked."""


class PQNAgent(Learner):
    """Online Q-RAG model, its target encoders, optimiser and schedule (the optimiser, schedule,
    RNG and counters are :class:`~qrag_training.learner.Learner`'s; ``env_steps`` counts the
    environment transitions collected over all ranks, which ``learning_start`` reads)."""

    config: PQNConfig
    alpha: float

    def __init__(
        self, model: QRAGModel, config: PQNConfig, seed: int = 0, dist: DistContext | None = None
    ) -> None:
        if model.config.state_at_last_pick:  # its rollouts score states without picks' positions
            raise ValueError("PQN does not train state_at_last_pick; use algo=next_hop")
        super().__init__(model, config, seed, dist)
        self.target_state: MeanPoolEncoder = (
            copy.deepcopy(model.state_encoder).requires_grad_(False).eval()
        )
        self.target_chunk: MeanPoolEncoder = (
            copy.deepcopy(model.chunk_encoder).requires_grad_(False).eval()
        )
        self.backward_passes = 0
        """Rollouts learned from (``accumulate_grads`` per optimiser step)."""
        self.alpha = self._annealed_alpha()

    # -- schedule -------------------------------------------------------------------------------
    def _annealed_alpha(self) -> float:
        return max(self.config.alpha_min, self.config.alpha * self.lr / self.config.lr)

    # -- ChunkEmbedder protocol (used by VectorEnv) -----------------------------------------------
    @property
    def frozen_layers(self) -> int:
        """Bottom transformer blocks that are never trained (shared by online and target)."""
        n = self.model.config.trainable_layers
        return 0 if n is None else max(0, len(self.model.chunk_encoder.layers()) - n)

    @torch.no_grad()
    def embed_chunk_lists(
        self, chunk_lists: Sequence[Sequence[str]]
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Online and target chunk embeddings of each episode, batched by similar length."""
        texts = [t for chunks in chunk_lists for t in chunks]
        shape = (len(texts), self.model.embedding_dim)
        online = torch.empty(shape, device=self.model.device)
        target = torch.empty(shape, device=self.model.device)
        order = self.model.length_order(texts, self.model.config.max_chunk_tokens)
        bs = self.config.embed_batch_size
        with eval_mode(self.model):
            for start in range(0, len(order), bs):
                ids = order[start : start + bs]
                batch = self.model.tokenize(
                    [texts[i] for i in ids], self.model.config.max_chunk_tokens
                )
                emb_online, emb_target = forward_online_and_target(
                    self.model.chunk_encoder, self.target_chunk, self.frozen_layers, batch
                )
                index = torch.tensor(ids, device=online.device)
                online[index] = emb_online.to(online.dtype)
                target[index] = emb_target.to(target.dtype)
        sizes = [len(c) for c in chunk_lists]
        return list(zip(online.split(sizes), target.split(sizes)))

    def rotate(self, emb: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate chunk embeddings by their positions."""
        return self.model.rotate_chunks(emb, positions)

    # -- acting ---------------------------------------------------------------------------------
    @torch.no_grad()
    def _values_from_states(
        self, state: torch.Tensor, rotated_target: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        q1, q2 = self.model.twin_q(state, rotated_target)
        return soft_values(q1, q2, mask, self.alpha, self.config.top_k)

    @torch.no_grad()
    def _target_values(
        self, texts: Sequence[str], rotated_target: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        batch = self.model.tokenize(texts, self.model.config.max_state_tokens)
        return self._values_from_states(self.target_state(**batch), rotated_target, mask)

    @torch.no_grad()
    def _final_values(
        self, finals: Sequence[FinalObservation | None], truncated: np.ndarray
    ) -> dict[int, float]:
        slots = [i for i, f in enumerate(finals) if f is not None and truncated[i]]
        if not slots:
            return {}
        obs = [finals[i] for i in slots]
        emb = torch.nn.utils.rnn.pad_sequence([o.target_chunk_emb for o in obs], batch_first=True)  # type: ignore[misc]
        pos = torch.nn.utils.rnn.pad_sequence(
            [torch.from_numpy(o.positions) for o in obs], batch_first=True
        )
        mask = torch.nn.utils.rnn.pad_sequence(
            [torch.from_numpy(o.mask) for o in obs], batch_first=True, padding_value=False
        ).to(emb.device)
        rotated = self.rotate(emb, pos.to(emb.device))
        values = self._target_values([o.state_text for o in obs], rotated, mask)
        return dict(zip(slots, values.tolist()))

    @torch.no_grad()
    def collect(self, venv: VectorEnv, num_steps: int) -> Rollout:
        """Step ``venv`` ``num_steps`` times with the current policy and record a rollout.

        ``next_values[t]`` (the target soft value of the state after the action at ``t``) is
        filled one iteration late: the state after step ``t`` is what step ``t + 1`` starts
        from, so its target values are computed there (in the same state-encoder pass as the
        acting Q-values once the policy acts); the states after the last step are valued once the
        loop ends. An environment whose episode ended at ``t`` has
        already started a new episode by then (auto-reset), so its ``next_values[t]`` is not
        back-filled: it stays 0 after a termination, and after a truncation holds the value of
        the episode's final state, computed right after the step from the final observation
        (only with ``bootstrap_truncation``: otherwise the return ends at the step cap, never
        reads that value, and it stays 0 too).
        """
        self.model.eval()
        t_len, b = num_steps, venv.num_envs
        rewards = torch.zeros(t_len, b)
        terminated = torch.zeros(t_len, b, dtype=torch.bool)
        truncated = torch.zeros(t_len, b, dtype=torch.bool)
        next_values = torch.zeros(t_len, b)
        positions = torch.zeros(t_len, b, dtype=torch.int64)
        q_taken = torch.full((t_len, b), float("nan"))
        rollout = Rollout([], [], positions, rewards, terminated, truncated, next_values, q_taken)
        for t in range(t_len):
            texts = venv.state_texts()
            mask = venv.masks()
            explore = self.env_steps < self.config.learning_start
            state = None
            if t > 0 and explore:
                values = self._target_values(texts, venv.rotated(target=True), mask).cpu()
            elif t > 0:
                batch = self.model.tokenize(texts, self.model.config.max_state_tokens)
                state, target_state = forward_online_and_target(
                    self.model.state_encoder, self.target_state, self.frozen_layers, batch
                )
                values = self._values_from_states(
                    target_state, venv.rotated(target=True), mask
                ).cpu()
            if t > 0:  # back-fill: these states follow the actions of step t - 1
                alive = ~(terminated[t - 1] | truncated[t - 1])  # not reset in between
                next_values[t - 1] = torch.where(alive, values, next_values[t - 1])
            if explore:
                actions = sample_actions(uniform_probs(mask), self.rng)
            else:
                if state is None:
                    state = self.model.embed_states(texts)
                q1, q2 = self.model.twin_q(state, venv.rotated(target=False))
                q = q1 + q2
                actions = sample_actions(
                    soft_greedy_probs(q, mask, self.alpha, self.config.top_k), self.rng
                )
                q_taken[t] = q.gather(1, torch.from_numpy(actions).to(q.device)[:, None])[
                    :, 0
                ].cpu()
            step = venv.step(actions)
            self.env_steps += b * self.dist.world_size  # every rank steps as many
            rollout.state_texts.append(texts)
            rollout.action_texts.append(step.action_texts)
            positions[t] = torch.from_numpy(step.action_positions)
            rewards[t] = torch.from_numpy(step.rewards)
            terminated[t] = torch.from_numpy(step.terminated)
            truncated[t] = torch.from_numpy(step.truncated)
            if self.config.bootstrap_truncation:  # else the return ends there: V is never read
                for slot, value in self._final_values(step.finals, step.truncated).items():
                    next_values[t, slot] = value
            rollout.episode_returns.extend(step.episode_returns)
            rollout.episode_solved.extend(step.episode_solved)
        # the states after the last step: the same back-fill for the last transitions
        values = self._target_values(
            venv.state_texts(), venv.rotated(target=True), venv.masks()
        ).cpu()
        alive = ~(terminated[-1] | truncated[-1])
        next_values[-1] = torch.where(alive, values, next_values[-1])
        return rollout

    # -- learning -------------------------------------------------------------------------------
    def returns(self, rollout: Rollout) -> torch.Tensor:
        """Q(lambda) targets ``(T, B)`` of a rollout."""
        c = self.config
        terminated = (
            rollout.terminated if c.bootstrap_truncation else rollout.terminated | rollout.truncated
        )
        return q_lambda_returns(
            rollout.rewards, terminated, rollout.truncated, rollout.next_values, c.gamma, c.lam
        )

    def learn(self, rollout: Rollout) -> dict[str, float]:
        """One backward pass on a rollout; an optimiser step every ``accumulate_grads`` calls.

        Returns:
            ``loss``, ``q_mean`` (of the recomputed Q) and ``target_mean``; ``grad_norm`` when an
            optimiser step was taken.
        """
        c = self.config
        targets = self.returns(rollout).reshape(-1).to(self.model.device)
        texts = [s for row in rollout.state_texts for s in row]
        chunks = [a for row in rollout.action_texts for a in row]
        positions = rollout.action_positions.reshape(-1).to(self.model.device)
        n = len(texts)
        size = c.micro_batch or n
        self.model.train(c.dropout)
        total, q_sum = 0.0, 0.0
        for start in range(0, n, size):
            sl = slice(start, start + size)
            with bf16_autocast(self.model.device, self.bf16):
                state = self.model.embed_states(texts[sl])
                chunk_emb = self.model.embed_chunks_grad(chunks[sl])
            chunk = self.model.rotate_chunks(chunk_emb, positions[sl])
            q1, q2 = self.model.twin_q(state, chunk.unsqueeze(1))
            q1, q2 = q1[:, 0].float(), q2[:, 0].float()
            g = targets[sl]
            loss = 0.5 * F.mse_loss(2 * q1, g, reduction="sum") + 0.5 * F.mse_loss(
                2 * q2, g, reduction="sum"
            )
            (loss / (n * c.accumulate_grads)).backward()
            total += float(loss.detach())
            q_sum += float((q1 + q2).detach().sum())
        self.model.eval()
        self.backward_passes += 1
        out = {"loss": total / n, "q_mean": q_sum / n, "target_mean": float(targets.mean())}
        if self.backward_passes % c.accumulate_grads == 0:
            out["grad_norm"] = self.optimizer_step()
        return out

    def optimizer_step(self) -> float:
        """Average the gradients over the ranks, clip, step, schedule, anneal alpha, Polyak-update
        the targets; returns the grad norm."""
        norm = self._step_optimizer()
        self.alpha = self._annealed_alpha()
        self.polyak_update()
        return norm

    def polyak_update(self) -> None:
        """``target <- (1 - tau) * target + tau * online`` for the trained parameters."""
        polyak_update(self.model, self.target_state, self.target_chunk, self.config.tau)

    # -- resumable state ------------------------------------------------------------------------
    def target_tensors(self) -> dict[str, torch.Tensor]:
        """Target-encoder tensors that differ from the base model (the trained part)."""
        return target_tensors(self.model, self.target_state, self.target_chunk)

    def load_target_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Inverse of :meth:`target_tensors` (targets are first copied from the online model)."""
        load_target_tensors(self.model, self.target_state, self.target_chunk, tensors)

    def scalars(self) -> dict[str, Any]:
        """The learner's counters, schedule and RNG state, with PQN's own counter and alpha."""
        return {
            **super().scalars(),
            "backward_passes": self.backward_passes,
            "alpha": self.alpha,
        }

    def load_scalars(self, data: dict[str, Any]) -> None:
        """Inverse of :meth:`scalars`."""
        super().load_scalars(data)
        self.backward_passes = int(data["backward_passes"])
        self.alpha = float(data["alpha"])
