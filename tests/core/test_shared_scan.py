"""The block scan a batch of states shares (`scan.top_k_shared`) against brute force, and the
batch search against one search per question on an index with duplicate chunks (equal Q)."""

from __future__ import annotations

import pytest
import torch
from search_reference import QUERIES

from qrag_integrations.core.exact_scan import top_k_shared
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.positions import relative_runs, rotate
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings


def brute_force(
    emb: torch.Tensor, runs: list[tuple[int, int, int]], states: torch.Tensor, picked, k: int
) -> list[list[tuple[int, int]]]:
    """Per state, the k best untaken ``(rank, position)`` by exact Q, lower rank first on ties."""
    out = []
    for col, state in enumerate(states):
        scored = []
        for a, b, p in runs:
            rot = rotate(state.view(1, -1), torch.tensor([p]), 10000.0, inverse=True)[0]
            for r in range(a, b):
                if r not in picked[col]:
                    scored.append((-float(emb[r] @ rot), r, p))
        out.append([(r, p) for _, r, p in sorted(scored)[:k]])
    return out


def brute_force_q(emb: torch.Tensor, states: torch.Tensor, picks) -> torch.Tensor:
    """``(k, B)`` Q-values of brute force's picks at position 0."""
    return torch.stack(
        [torch.stack([emb[r] @ states[c] for r, _ in pick]) for c, pick in enumerate(picks)], 1
    )


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("block", [2, 5, 64])
@pytest.mark.parametrize("relative", [False, True])
def test_top_k_shared_matches_brute_force_with_ties(k: int, block: int, relative: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    # small integers make every product exact, so equal rows tie bit for bit in any block
    base = torch.randint(-3, 4, (10, 8), generator=gen).float()
    emb = torch.cat([base, base[[3, 7, 3]]])  # rows 10-12 repeat 3, 7, 3: equal scores
    # one position for all (equal rows tie), or relative positions over several runs
    runs = relative_runs(len(emb), [], step=20, span=0.9) if relative else [(0, len(emb), 0)]
    states = torch.randint(-3, 4, (4, 8), generator=gen).float()
    states[1] = emb[3]  # rows 3, 10 and 12 tie at the top for this state
    picked = [[], [3], [0, 12], []]
    rotated = torch.stack(
        [rotate(states, torch.full((len(states),), p), 10000.0, inverse=True) for _, _, p in runs]
    )
    q, rank, pos = top_k_shared(emb, runs, rotated, picked, k, block)
    assert q.shape == (k, len(states))
    want = brute_force(emb, runs, states, picked, k)
    got = [list(zip(rank[:, c].tolist(), pos[:, c].tolist())) for c in range(len(states))]
    if k == 1 or relative:
        assert got == want
    else:  # torch.topk orders equal values as it likes: the same Q-values, distinct ranks
        assert all(len({r for r, _ in g}) == k for g in got)
        assert torch.equal(q, brute_force_q(emb, states, want))
    if k == 1 and not relative:
        assert got[1][0][0] == 10  # of rows 3 (taken), 10 and 12, the lower untaken rank
    assert all(r not in picked[c] for c in range(len(states)) for r, _ in got[c])


def test_top_k_shared_more_than_left_gives_minus_inf_rows() -> None:
    emb = torch.randn(3, 4)
    runs = [(0, 3, 0)]
    q, rank, _ = top_k_shared(emb, runs, torch.randn(1, 2, 4), [[0, 1], []], 3, 2)
    assert rank[0, 0] == 2 and torch.isinf(q[1:, 0]).all()
    assert sorted(rank[:, 1].tolist()) == [0, 1, 2]


@pytest.mark.parametrize("mode", ["none", "relative"])
def test_batch_search_matches_single_searches_with_duplicate_chunks(make_model, mode: str) -> None:
    """The batch's shared first-step scan picks what each question's own scan picks, also where
    duplicate chunks give equal Q-values (the lower rank wins in both)."""
    model = make_model(mode)
    emb = torch.randn(20, 32, generator=torch.Generator().manual_seed(1))
    emb = torch.cat([emb, emb[:10]])
    index = ChunkIndex(32)
    index.add([f"t{i}" for i in range(30)], emb, ids=[f"c{i}" for i in range(30)])
    searcher = MultiStepSearcher(model, index, SearchSettings(block_size=7))
    batch = searcher.search(QUERIES, k=4)
    for query, hits in zip(QUERIES, batch):
        single = searcher.search([query], k=4)[0]
        assert [h.chunk.id for h in hits] == [h.chunk.id for h in single]
        if mode == "none":  # a duplicate never beats its lower-ranked twin
            assert int(hits[0].chunk.id[1:]) < 20
