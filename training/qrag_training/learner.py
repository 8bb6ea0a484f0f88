"""What every learner keeps besides its loss, written once: :class:`Learner`.

Both learners of ``qrag-train`` (:class:`~qrag_training.next_hop.NextHopLearner`, which trained
every shipped checkpoint, and :class:`~qrag_training.pqn.PQNAgent`, the paper's loop) hold the
online model, their place in a data-parallel run, AdamW over the trainable parameters with its
warm-up / decay schedule, a numpy RNG and two counters, and hand the trainer the same resumable
state (:meth:`Learner.scalars`, :meth:`Learner.target_tensors`). The optimiser step is shared
too: average the gradients over the ranks, clip, step, schedule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from qrag_integrations.core.model import QRAGModel
from qrag_training.distributed import DistContext
from qrag_training.optim import (
    OptimConfig,
    load_scheduler_state,
    scheduled_adamw,
    scheduler_state,
    trainable_params,
)


class Learner:
    """The online model, optimiser, schedule, RNG and counters of a learner, and their
    JSON-able form for resumable runs (a subclass adds its own loss and, if it has them, its
    target networks and further counters)."""

    def __init__(
        self, model: QRAGModel, config: OptimConfig, seed: int = 0, dist: DistContext | None = None
    ) -> None:
        self.model = model
        self.config = config
        self.dist = dist or DistContext()
        """Data-parallel place: gradients are averaged over the ranks before each step."""
        self.params = trainable_params(model)
        self.optimizer, self.scheduler = scheduled_adamw(self.params, config)
        self.rng = np.random.default_rng(seed)
        self.updates = 0
        """Optimiser steps taken."""
        self.env_steps = 0
        """Training transitions (PQN) or hop states (next-hop) seen, over all ranks."""
        self.alpha: float | None = None
        """Soft-greedy temperature (PQN); ``None`` for a learner without one."""
        self.bf16 = config.bf16_on(model.device)
        """Encoder passes of the loss forward in bfloat16 autocast (``config.autocast``)."""

    @property
    def lr(self) -> float:
        """Learning rate of the next optimiser step."""
        return float(self.optimizer.param_groups[0]["lr"])

    def _step_optimizer(self) -> float:
        """Average the gradients over the ranks, clip, step, schedule, count; the grad norm."""
        self.dist.average_gradients(self.params)
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.config.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.updates += 1
        return float(norm)

    # -- what the trainer saves and restores ------------------------------------------------------
    def target_tensors(self) -> dict[str, torch.Tensor]:
        """Target-network tensors to save with the training state (none here)."""
        return {}

    def load_target_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Inverse of :meth:`target_tensors` (here a non-empty dict is an error)."""
        if tensors:
            raise ValueError(
                f"{type(self).__name__} has no target tensors, got {sorted(tensors)[:3]}"
            )

    def scalars(self) -> dict[str, Any]:
        """JSON-able counters, schedule and RNG state."""
        return {
            "updates": self.updates,
            "env_steps": self.env_steps,
            "scheduler": scheduler_state(self.scheduler),
            "rng": self.rng.bit_generator.state,
        }

    def load_scalars(self, data: dict[str, Any]) -> None:
        """Inverse of :meth:`scalars`."""
        self.updates = int(data["updates"])
        self.env_steps = int(data["env_steps"])
        load_scheduler_state(self.scheduler, data["scheduler"])
        self.rng.bit_generator.state = data["rng"]
