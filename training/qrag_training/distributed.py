"""Data-parallel training with ``torch.distributed`` (``torchrun --nproc_per_node N -m qrag_training.train``).

What changes with ``WORLD_SIZE > 1`` (nothing does without it: every helper here is a no-op for a
single process, so a plain run stays bit-identical):

* **Batch.** ``batch_size`` / ``envs_parallel`` (PQN) and ``questions_per_step`` (next-hop) are
  *per rank*: the global batch of one optimiser step is the per-rank batch x ``world_size``. The
  learning-rate schedule counts optimiser steps, as before.
* **Data.** Every pass of the training pool is shuffled with the same permutation on every rank
  and split into disjoint stripes (:func:`stripe`); policy sampling, dropout and the global RNGs
  of rank ``r > 0`` are seeded with :func:`rank_seed`.
* **Gradients.** One explicit all-reduce (mean) of the flattened gradients of the trainable
  parameters per optimiser step (:meth:`DistContext.average_gradients`), before clipping. Not
  ``DistributedDataParallel``: the Q-network is two encoders called through model methods
  (``embed_states``, ``embed_chunks_grad``), not one ``forward``; only the top layers may train;
  gradients are accumulated over rollouts and micro-batches; and the target encoders must stay
  outside. DDP would need ``no_sync`` around every accumulation step and
  ``find_unused_parameters`` for the frozen part; one bucketed all-reduce after the last
  backward pass is the same communication with none of that. Identical averaged gradients and
  identical optimiser states keep the weights (and the Polyak targets) identical on all ranks.
* **Side effects.** Rank 0 alone evaluates and writes the run folder (checkpoints, metrics,
  TensorBoard); the others log at WARNING. Checkpoint saves are fenced by barriers.
* **Resume.** A checkpoint holds the model, optimiser, schedule, counters, target encoders and
  rank 0's RNG and data-stream position; it resumes with any number of ranks. Every rank loads
  all of it; rank 0 restores its RNGs, the others re-seed with :func:`rank_seed` from the step
  and their rank. All ranks continue at rank 0's (pass, cursor) in their own stripe of the pool,
  so after a change of world size a few episodes of the current pass may be seen twice or not at
  all (ranks > 0 save neither their RNGs nor their stream positions).
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

logger = logging.getLogger(__name__)

T = TypeVar("T")


def stripe(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """Rank ``rank``'s share of ``items``: every ``world_size``-th item starting at ``rank``.

    The stripes of all ranks are disjoint and together hold every item; with one rank the share is
    ``items`` itself (same order).

    Raises:
        ValueError: ``world_size < 1`` or ``rank`` outside ``[0, world_size)``.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size} ranks")
    return list(items[rank::world_size])


def rank_seed(seed: int, rank: int, step: int = 0) -> int:
    """The seed of rank ``rank`` for a run seeded ``seed``, (re)started at optimiser step ``step``.

    Rank 0 of a fresh run keeps ``seed``; any other rank or step gets a different, deterministic
    seed (a resumed run's ranks > 0 cannot read their RNG states from the checkpoint, which holds
    rank 0's).
    """
    if rank == 0 and step == 0:
        return seed
    return int(np.random.SeedSequence([seed, rank, step]).generate_state(1)[0])


@dataclass(frozen=True)
class DistContext:
    """This process's place in a data-parallel run (``world_size == 1``: a plain run)."""

    rank: int = 0
    """Global rank (``RANK``)."""
    world_size: int = 1
    """Processes in the run (``WORLD_SIZE``)."""
    local_rank: int = 0
    """Rank on this machine (``LOCAL_RANK``): picks ``cuda:<local_rank>``."""

    @property
    def enabled(self) -> bool:
        """More than one process: collectives are real."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0, which evaluates and writes the run folder."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every rank (no-op alone)."""
        if self.enabled:
            dist.barrier()

    def average_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Replace each parameter's gradient with its mean over the ranks (one all-reduce).

        A parameter without a gradient on this rank takes part with zeros (and gets the mean), so
        every rank calls the collective with the same tensor.
        """
        if not self.enabled:
            return
        grads = []
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= self.world_size
        for g, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(synced)

    def sum_floats(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over the ranks (float64; no-op alone)."""
        if not self.enabled:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any rank (e.g. a time budget spent)."""
        return bool(self.sum_floats([1.0 if flag else 0.0])[0] > 0)

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    @torch.no_grad()
    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Copy rank 0's parameters and buffers into ``module`` on every rank."""
        if not self.enabled:
            return
        for tensor in [*module.parameters(), *module.buffers()]:
            dist.broadcast(tensor.data, src=0)


def context_from_env(environ: Mapping[str, str] | None = None) -> DistContext:
    """The :class:`DistContext` described by torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``.

    Raises:
        ValueError: inconsistent values (e.g. ``RANK >= WORLD_SIZE``).
    """
    env = os.environ if environ is None else environ
    world = int(env.get("WORLD_SIZE", "1") or 1)
    rank = int(env.get("RANK", "0") or 0)
    local = int(env.get("LOCAL_RANK", str(rank)) or 0)
    if world < 1 or not 0 <= rank < world or local < 0:
        raise ValueError(
            f"bad torch.distributed environment: RANK={rank} WORLD_SIZE={world} LOCAL_RANK={local}"
        )
    return DistContext(rank, world, local)


def rank_device(device: str, ctx: DistContext) -> str:
    """The device of this rank: ``cuda:<local_rank>`` for a CUDA run with several ranks."""
    if ctx.enabled and torch.device(device).type == "cuda":
        return f"cuda:{ctx.local_rank}"
    return device


def default_backend(device: str) -> str:
    """``nccl`` for CUDA, ``gloo`` otherwise."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def init_distributed(
    ctx: DistContext, device: str, backend: str | None = None, timeout_minutes: float = 30.0
) -> None:
    """Join the process group of a multi-rank run (``MASTER_ADDR`` / ``MASTER_PORT`` from torchrun).

    Nothing happens for a single process or when the group already exists.

    Args:
        ctx: this process's place.
        device: this rank's device (see :func:`rank_device`); a CUDA device becomes current.
        backend: ``gloo``, ``nccl`` or ``mpi``; ``None`` picks :func:`default_backend`.
        timeout_minutes: how long collectives wait (rank 0's evaluation runs while others wait).
    """
    if not ctx.enabled or dist.is_initialized():
        return
    if torch.device(device).type == "cuda":
        torch.cuda.set_device(torch.device(device))
    backend = backend or default_backend(device)
    dist.init_process_group(
        backend,
        rank=ctx.rank,
        world_size=ctx.world_size,
        timeout=datetime.timedelta(minutes=timeout_minutes),
    )
    logger.info(
        "rank %d of %d joined the %s process group (device %s)",
        ctx.rank,
        ctx.world_size,
        backend,
        device,
    )


def quiet_other_ranks(ctx: DistContext) -> None:
    """Ranks other than 0 log only warnings and errors."""
    if not ctx.is_main:
        logging.getLogger("qrag_training").setLevel(logging.WARNING)
        logging.getLogger("qrag_integrations").setLevel(logging.WARNING)


def shutdown(ctx: DistContext) -> None:
    """Leave the process group (no-op alone)."""
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()


def reduce_record(
    ctx: DistContext, returns: list[float], solved: list[bool], window: dict[str, list[float]]
) -> dict[str, Any]:
    """A training log record over all ranks' episodes and steps: episode count, mean reward and
    success, and the mean of every ``window`` series (a collective: every rank calls it)."""
    keys = list(window)
    sums = ctx.sum_floats(
        [sum(returns), len(returns), float(sum(solved))]
        + [x for k in keys for x in (sum(window[k]), len(window[k]))]
    )
    out: dict[str, Any] = {"episodes": int(sums[1])}
    out["reward"] = sums[0] / sums[1] if sums[1] else None
    out["success"] = sums[2] / sums[1] if sums[1] else None
    for i, k in enumerate(keys):
        total, count = sums[3 + 2 * i], sums[4 + 2 * i]
        if count:
            out[k] = total / count
    return out
