"""The optimiser every learner uses: AdamW over the model's trainable parameters with linear
warm-up then linear decay, and the JSON-able form of its schedule for resumable runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from qrag_integrations.core.precision import bf16_is_fast

#: Values of :attr:`OptimConfig.autocast`.
AUTOCAST = (None, "bf16", "auto")


@dataclass
class OptimConfig:
    """Optimiser and loss-forward settings shared by every learner config (``PQNConfig`` and
    ``NextHopConfig`` extend it). Defaults are AdamW's usual ones, the next-hop learner's;
    ``PQNConfig`` keeps the paper's betas (0.9, 0.98), eps 1e-6 and 1,000 warm-up steps. Each
    learner's defaults are the values of its Hydra file (``conf/algo/<kind>.yaml``; a test keeps
    them equal)."""

    lr: float = 5e-5
    """Peak AdamW learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    eps: float = 1e-8
    """AdamW epsilon."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    max_grad_norm: float = 2.0
    """Gradient clipping norm."""
    warmup: int = 20
    """Optimiser steps of linear learning-rate warm-up."""
    total_updates: int = 1000
    """Optimiser steps of the whole run; the learning rate decays linearly to
    ``final_lr_ratio * lr`` at this step (a run sets it from its ``train.steps``)."""
    final_lr_ratio: float = 0.0
    """Learning-rate fraction left at ``total_updates``."""
    dropout: bool = True
    """Encoders in training mode (dropout on) for the loss forward; acting is always in eval mode."""
    embed_batch_size: int = 128
    """Chunks per forward pass when embedding episodes' chunks."""
    autocast: str | None = None
    """The encoder passes of the loss forward (and the next-hop learner's negative mining) in
    bfloat16 autocast: ``"bf16"``, ``"auto"`` (bf16 where it is faster: a CPU with AVX512-BF16 /
    AMX or a bf16 GPU, :func:`~qrag_integrations.core.precision.bf16_is_fast`) or ``None``
    (float32). Weights, Q-values, losses and the optimiser stay float32."""

    def __post_init__(self) -> None:
        self.betas = (float(self.betas[0]), float(self.betas[1]))
        if self.autocast not in AUTOCAST:
            raise ValueError(f"autocast must be null, bf16 or auto, got {self.autocast!r}")

    def bf16_on(self, device: torch.device) -> bool:
        """Whether the encoder passes run in bfloat16 autocast on ``device``."""
        return self.autocast == "bf16" or (self.autocast == "auto" and bf16_is_fast(device))


def lr_factor(update: int, warmup: int, total: int, final_ratio: float = 0.0) -> float:
    """Learning-rate multiplier for optimiser step ``update`` (0-based): linear warm-up from
    ``1 / warmup`` to 1 over ``warmup`` steps, then linear decay to ``final_ratio`` at ``total``."""
    if warmup > 0 and update < warmup:
        return (update + 1) / warmup
    span = max(1, total - warmup)
    return max(final_ratio, 1.0 - (1.0 - final_ratio) * (update - warmup) / span)


def trainable_params(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """Parameters that train; an error if there are none."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    return params


def scheduled_adamw(
    params: list[torch.nn.Parameter], settings: OptimConfig
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW and its warm-up / linear-decay schedule (:func:`lr_factor`)."""
    optimizer = torch.optim.AdamW(
        params,
        lr=settings.lr,
        betas=settings.betas,
        eps=settings.eps,
        weight_decay=settings.weight_decay,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda u: lr_factor(u, settings.warmup, settings.total_updates, settings.final_lr_ratio),
    )
    return optimizer, scheduler


def scheduler_state(scheduler: torch.optim.lr_scheduler.LambdaLR) -> dict[str, Any]:
    """The schedule's state without its (unserialisable) lambdas."""
    return {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}


def load_scheduler_state(
    scheduler: torch.optim.lr_scheduler.LambdaLR, state: dict[str, Any]
) -> None:
    """Inverse of :func:`scheduler_state` (the scheduler keeps its own lambdas)."""
    full = dict(state)
    full["lr_lambdas"] = [None] * len(scheduler.optimizer.param_groups)
    scheduler.load_state_dict(full)
