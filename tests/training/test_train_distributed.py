"""The data-parallel helpers alone (one process): rank stripes, seeds, the torchrun environment."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from qrag_training.distributed import DistContext, context_from_env, rank_device, rank_seed, stripe
from qrag_training.env import EpisodeStream


@pytest.mark.parametrize("n", [0, 1, 7, 10])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_stripes_are_disjoint_and_cover_everything(n: int, world: int) -> None:
    items = list(range(100, 100 + n))
    parts = [stripe(items, r, world) for r in range(world)]
    assert sorted(x for p in parts for x in p) == items
    assert sum(len(p) for p in parts) == n
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert stripe(items, 0, 1) == items


def test_stripe_refuses_a_rank_outside_the_world() -> None:
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        stripe([1, 2, 3], 2, 2)
    with pytest.raises(ValueError):
        stripe([1], 0, 0)


def test_rank_seeds_keep_rank0_and_differ_elsewhere() -> None:
    assert rank_seed(5, 0) == 5
    seeds = {rank_seed(5, r, s) for r in range(4) for s in (0, 10, 20)}
    assert len(seeds) == 12
    assert rank_seed(5, 1, 10) == rank_seed(5, 1, 10)


def test_context_from_torchrun_environment() -> None:
    assert context_from_env({}) == DistContext(0, 1, 0)
    ctx = context_from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.enabled, ctx.is_main) == (
        3,
        4,
        1,
        True,
        False,
    )
    with pytest.raises(ValueError, match="RANK=4 WORLD_SIZE=4"):
        context_from_env({"RANK": "4", "WORLD_SIZE": "4"})
    assert rank_device("cuda", ctx) == "cuda:1" and rank_device("cpu", ctx) == "cpu"
    assert rank_device("cuda:0", DistContext()) == "cuda:0"


def test_single_process_collectives_change_nothing() -> None:
    ctx = DistContext()
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.tensor([1.0, 2.0, 3.0])
    ctx.average_gradients([p])
    ctx.barrier()
    assert p.grad.tolist() == [1.0, 2.0, 3.0]
    assert ctx.sum_floats([1, 2.5]) == [1.0, 2.5] and ctx.any(True) and not ctx.any(False)
    assert ctx.broadcast_object({"a": 1}) == {"a": 1}


def test_episode_stream_stripes_split_each_pass() -> None:
    pool = list(range(11))
    whole = EpisodeStream(lambda p: pool, seed=3)
    assert [whole() for _ in range(11)] == list(np.random.default_rng(3).permutation(11))
    ranks = [EpisodeStream(lambda p: pool, seed=3, rank=r, world_size=2) for r in range(2)]
    first = [[s() for _ in range(len(stripe(pool, r, 2)))] for r, s in enumerate(ranks)]
    assert sorted(first[0] + first[1]) == pool  # one pass: disjoint, complete
    with pytest.raises(ValueError, match="none for rank 1 of 2"):
        EpisodeStream(lambda p: [0], seed=0, rank=1, world_size=2)()
