"""The optimiser every learner uses: AdamW over the model's trainable parameters with linear
warm-up then linear decay, and the JSON-able form of its schedule for resumable runs."""

from __future__ import annotations

from typing import Any, Protocol

import torch


class OptimizerSettings(Protocol):
    """The fields of a learner config (``PQNConfig``, ``NextHopConfig``) the optimiser reads."""

    lr: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    warmup: int
    total_updates: int
    final_lr_ratio: float


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
    params: list[torch.nn.Parameter], settings: OptimizerSettings
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW and its warm-up / linear-decay schedule (:func:`lr_factor`)."""
    optimizer = torch.optim.AdamW(
        params, lr=settings.lr, betas=settings.betas, eps=settings.eps, weight_decay=settings.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda u: lr_factor(u, settings.warmup, settings.total_updates, settings.final_lr_ratio)
    )
    return optimizer, scheduler


def scheduler_state(scheduler: torch.optim.lr_scheduler.LambdaLR) -> dict[str, Any]:
    """The schedule's state without its (unserialisable) lambdas."""
    return {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}


def load_scheduler_state(scheduler: torch.optim.lr_scheduler.LambdaLR, state: dict[str, Any]) -> None:
    """Inverse of :func:`scheduler_state` (the scheduler keeps its own lambdas)."""
    full = dict(state)
    full["lr_lambdas"] = [None] * len(scheduler.optimizer.param_groups)
    scheduler.load_state_dict(full)
