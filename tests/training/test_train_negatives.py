"""Sampled negatives and the frozen-layer cache in the next-hop learner."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from qrag_training.data.episode import Episode
from qrag_training.negatives import NegativeSampler
from qrag_training.next_hop import NextHopConfig, NextHopLearner

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel


def one_hot(texts, dim: int = 8) -> torch.Tensor:
    """Embeddings where text ``"c<i>"`` points along axis ``i`` (and a question ``"q<i>"`` too)."""
    out = torch.zeros(len(texts), dim)
    for row, t in enumerate(texts):
        out[row, int(t[1:]) % dim] = 1.0 + 0.01 * int(t[1:])
    return torch.nn.functional.normalize(out, dim=-1)


def test_sampler_keeps_support_hard_and_random_negatives_in_order() -> None:
    chunks = [f"c{i}" for i in range(8)]
    episode = Episode("e", "q5", chunks, [2], answer="x", titles=[f"t{i}" for i in range(8)])
    sampler = NegativeSampler(one_hot, one_hot, hard=1, random=2)
    (small,) = sampler([episode], np.random.default_rng(0))
    assert "c2" in small.chunks and "c5" in small.chunks  # the support and the hardest negative
    assert len(small.chunks) == 4 and small.chunks == sorted(small.chunks, key=chunks.index)
    assert small.chunks[small.support[0]] == "c2"
    assert small.titles == [f"t{c[1:]}" for c in small.chunks]
    short = Episode("s", "q1", chunks[:3], [0])
    assert sampler([short], np.random.default_rng(0)) == [short]  # nothing to drop
    with pytest.raises(ValueError, match="one of them > 0"):
        NegativeSampler(one_hot, one_hot, hard=0, random=0)


def test_hop_negatives_are_the_chunks_most_like_each_supporting_one() -> None:
    """``c6`` leans toward the gold ``c2`` (another move of the person a gold fact names): kept
    as a hop negative, though the question ranks it last."""

    def embed(texts):
        out = one_hot(texts)
        for row, t in enumerate(texts):
            if t == "c6":
                out[row] = torch.nn.functional.normalize(
                    torch.eye(8)[2] + 0.3 * torch.eye(8)[6], dim=0
                )
        return out

    chunks = [f"c{i}" for i in range(8)]
    episode = Episode("e", "q5", chunks, [2])
    (plain,) = NegativeSampler(embed, embed, hard=1)([episode], np.random.default_rng(0))
    (hop,) = NegativeSampler(embed, embed, hard=1, hop=1)([episode], np.random.default_rng(0))
    assert plain.chunks == ["c2", "c5"] and hop.chunks == ["c2", "c5", "c6"]
    assert hop.chunks[hop.support[0]] == "c2"
    (only_hop,) = NegativeSampler(embed, embed, hard=0, hop=2)([episode], np.random.default_rng(0))
    assert len(only_hop.chunks) == 3 and "c6" in only_hop.chunks


def episodes(n: int = 4) -> list[Episode]:
    words = ["kitchen", "garden", "office", "hallway", "bedroom", "bathroom"]
    out = []
    for i in range(n):
        chunks = [f"mary went to the {w} on day {i}." for w in words]
        out.append(Episode(str(i), f"where was mary on day {i} near the {words[i]}?", chunks, [i]))
    return out


def learner(model: QRAGModel, **kwargs) -> NextHopLearner:
    config = NextHopConfig(
        questions_per_step=4, states_per_question=1, dropout=False, warmup=0, **kwargs
    )
    return NextHopLearner(copy.deepcopy(model), config, seed=0)


def test_the_cache_changes_nothing_but_the_cost(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1, normalize=True)
    )
    eps = episodes()
    plain, cached = learner(model), learner(model, frozen_cache_mb=64)
    assert cached.chunk_cache is not None and plain.chunk_cache is None
    for _ in range(2):
        feed_a, feed_b = iter(eps), iter(eps)
        a = plain.step(lambda feed=feed_a: next(feed))
        b = cached.step(lambda feed=feed_b: next(feed))
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-5)
    # Adam turns a tiny gradient difference into up to lr per step on a near-zero gradient
    for p, q in zip(plain.model.parameters(), cached.model.parameters()):
        torch.testing.assert_close(p, q, atol=2 * 2 * 5e-5, rtol=1e-3)
    assert cached.chunk_cache.misses == 24 and cached.chunk_cache.hits == 24  # step 2: all cached


def test_bf16_autocast_keeps_the_cached_sampled_step_close(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1, normalize=True)
    )
    fast = {
        "frozen_cache_mb": 64,
        "hard_negatives": 2,
        "random_negatives": 1,
        "in_batch_negatives": False,
    }
    plain, bf16 = learner(model, **fast), learner(model, autocast="bf16", **fast)
    feed_a, feed_b = iter(episodes()), iter(episodes())
    a = plain.step(lambda: next(feed_a))
    b = bf16.step(lambda: next(feed_b))
    assert bf16.bf16 and b["loss"] == pytest.approx(a["loss"], rel=0.05)
    # weights and optimiser state stay float32
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())
    moments = [v for state in bf16.optimizer.state.values() for v in state.values()]
    assert all(m.dtype == torch.float32 for m in moments if m.dim() > 0)


def test_sampled_negatives_shrink_the_step(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1, normalize=True)
    )
    sampled = learner(model, hard_negatives=1, random_negatives=1, in_batch_negatives=False)
    seen: list[int] = []
    original = sampled.model.embed_chunks_grad
    sampled.model.embed_chunks_grad = lambda texts, **kw: (
        seen.append(len(texts)),
        original(texts),
    )[1]
    feed = iter(episodes())
    out = sampled.step(lambda: next(feed))
    assert seen == [4 * 3] and np.isfinite(out["loss"])  # 1 support + 1 hard + 1 random each
    with pytest.raises(ValueError, match="needs model.trainable_layers"):
        learner(QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))), frozen_cache_mb=8)


def test_a_shared_chunk_of_another_question_is_no_negative() -> None:
    from qrag_training.next_hop import in_batch_candidates

    step = ["a", "b", "c", "x", "b", "a", "y"]  # question 0: a b c; question 1: x b a y
    assert in_batch_candidates(step, 0, 3).tolist() == [1, 1, 1, 1, 0, 0, 1]
    assert in_batch_candidates(step, 3, 7).tolist() == [0, 0, 1, 1, 1, 1, 1]
