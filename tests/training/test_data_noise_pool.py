"""Episodes whose noise comes from a fixed pool (embedded once by a benchmark)."""

import hashlib
import json

import pytest
from qrag_training.data import NoisePool, NoiseSource, babilong_dataset, ruler_dataset


def _digest(episodes):
    return hashlib.sha256(
        json.dumps([e.to_json() for e in episodes], sort_keys=True).encode()
    ).hexdigest()


def test_existing_seeds_give_the_episodes_they_gave_before_pools_existed():
    # digests taken on the commit before NoisePool was added
    assert (
        _digest(babilong_dataset("qa2", 4, 1000, 7))
        == "c74577aa7e00059ea956c9cd7778b7ef18bd7e1cfa1c818c8b00de91412f7bd4"
    )
    assert _digest(babilong_dataset(["qa1", "qa3"], 4, [1000, 2000], 7)) == (
        "e67b5b2ad2d70c189dbb96882daf2f9ac91dcbec782b2861af42ff09df20bce2"
    )
    assert _digest(ruler_dataset("niah_multikey", 3, 1000, 7)) == (
        "4716e13e0d25d508cd9018fbf1c98b5b38f6c60a5888e02ebfd44cc6f4b623ea"
    )


def test_pool_is_a_seeded_passage_of_the_corpus():
    source = NoiseSource("bible")
    pool = source.pool(300, seed=3)
    assert len(pool) == 300 and pool.kind == "bible-pool"
    assert pool.sentences == source.pool(300, seed=3).sentences
    assert pool.sentences != source.pool(300, seed=4).sentences
    start = source.sentences.index(pool.sentences[0])
    assert pool.sentences == source.sentences[start : start + 300]
    with pytest.raises(ValueError, match="at least one"):
        source.pool(0, seed=3)
    with pytest.raises(ValueError, match="at least one"):
        NoisePool([])


def test_babilong_noise_comes_only_from_the_pool_in_pool_order():
    pool = NoiseSource("mixed").pool(100, seed=1)
    episodes = babilong_dataset("qa2", 6, 4000, seed=11, noise=pool)  # 160 chunks: the pool wraps
    plain = babilong_dataset("qa2", 6, 4000, seed=11)
    n = len(pool)
    for e, p in zip(episodes, plain, strict=True):
        story = set(e.meta["story_positions"])
        # the same stories (the haystack layout differs: the pool draws its start from the
        # episode generator over a different range)
        assert e.question == p.question and e.supporting_chunks == p.supporting_chunks
        assert [e.chunks[i] for i in sorted(story)] == [
            p.chunks[i] for i in sorted(p.meta["story_positions"])
        ]
        noise = [c for i, c in enumerate(e.chunks) if i not in story]
        starts = [i for i in range(n) if pool.sentences[i] == noise[0]]
        assert any(
            noise == [pool.sentences[(s + j) % n] for j in range(len(noise))] for s in starts
        )
        assert e.meta["noise"] == "mixed-pool"


def test_ruler_noise_comes_only_from_the_pool():
    pool = NoiseSource("mixed").pool(500, seed=2)
    pooled = ruler_dataset("niah_multivalue", 3, 4000, seed=5, noise=pool)
    plain = ruler_dataset("niah_multivalue", 3, 4000, seed=5)
    assert (
        pooled[0].answer == plain[0].answer and pooled[0].support == plain[0].support
    )  # same first draw
    for e in pooled:
        assert len(e.support) == 4 and all(
            e.chunks[i].startswith("One of the special magic") for i in e.support
        )
        assert all(c in set(pool.sentences) for i, c in enumerate(e.chunks) if i not in e.support)
