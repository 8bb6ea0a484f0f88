"""Tests for the noise corpus and BabiLong episode assembly."""

import random

import pytest
from qrag_training.data import (
    TASKS,
    NoiseSource,
    babilong_dataset,
    generate_babi,
    make_babilong_episode,
    tokens_to_sentences,
)
from qrag_training.data.babi_world import parse_fact
from qrag_training.data.noise import BABI_VOCAB_RE, MAX_WORDS, MIN_WORDS, NOISE_KINDS

TARGET_TOKENS = 2000


@pytest.fixture(scope="module")
def episodes():
    return {task: babilong_dataset(task, 15, TARGET_TOKENS, seed=5) for task in TASKS}


def _is_babi_fact(sentence):
    try:
        parse_fact(sentence)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_noise_sentences_are_clean(kind):
    noise = NoiseSource(kind, seed=0)
    assert len(noise) > 10_000
    for sentence in noise.sample(3000, random.Random(1)):
        assert MIN_WORDS <= len(sentence.split()) <= MAX_WORDS
        assert sentence[-1] in ".!?'\")" and not BABI_VOCAB_RE.search(sentence)
        assert "[" not in sentence and "Exeunt" not in sentence


def test_noise_filter_catches_babi_vocabulary():
    assert BABI_VOCAB_RE.search("And John went into the Garden of the king.")
    assert BABI_VOCAB_RE.search("She poured the milk.")
    assert not BABI_VOCAB_RE.search("The king rode out at dawn with his men.")


def test_noise_sampling_is_seeded_and_contiguous():
    noise = NoiseSource("bible", seed=0)
    a = noise.sample(50, random.Random(9))
    assert a == noise.sample(50, random.Random(9))
    start = noise.sentences.index(a[0])
    assert list(noise.sentences[start : start + 50]) == a
    assert len(noise.sample(len(noise) + 5, random.Random(0))) == len(noise) + 5
    with pytest.raises(ValueError, match="mixed"):
        NoiseSource("poetry")


def test_tokens_to_sentences_uses_the_paper_scale():
    assert tokens_to_sentences(1000) == 40
    assert tokens_to_sentences(1_000_000) == 40_000
    assert tokens_to_sentences(4000) == 160
    assert tokens_to_sentences(1) == 1


def test_story_sentences_appear_in_order_and_support_points_at_facts(episodes):
    for task, batch in episodes.items():
        samples = generate_babi(task, 15, 5)
        for ep, sample in zip(batch, samples, strict=True):
            ep.validate()
            positions = ep.meta["story_positions"]
            assert positions == sorted(positions)
            assert [ep.chunks[p] for p in positions] == sample.story
            assert ep.support == [positions[i] for i in sample.supporting]
            facts = [sample.story[i] for i in sample.supporting]
            assert [ep.chunks[i] for i in ep.support] == facts
            assert (ep.question, ep.answer) == (sample.question, sample.answer)
            assert ep.meta["task"] == task


def test_noise_chunks_hold_no_facts_or_names(episodes):
    for batch in episodes.values():
        for ep in batch:
            story = set(ep.meta["story_positions"])
            for i, chunk in enumerate(ep.chunks):
                if i in story:
                    continue
                assert not BABI_VOCAB_RE.search(chunk)
                assert not _is_babi_fact(chunk)
                assert ep.answer not in chunk.split()


def test_chunk_count_matches_scale(episodes):
    for batch in episodes.values():
        for ep in batch:
            assert len(ep.chunks) == tokens_to_sentences(TARGET_TOKENS) == 80
    sample = generate_babi("qa3", 1, 0, story_len=(30, 30))[0]
    short = make_babilong_episode(sample, NoiseSource("shakespeare"), 100, random.Random(0))
    assert short.chunks == sample.story  # never fewer chunks than story sentences


def test_babilong_is_deterministic():
    assert babilong_dataset("qa2", 5, 1000, seed=1) == babilong_dataset("qa2", 5, 1000, seed=1)
    assert babilong_dataset("qa2", 5, 1000, seed=1) != babilong_dataset("qa2", 5, 1000, seed=2)


def test_large_haystack_is_fast_enough():
    ep = babilong_dataset("qa1", 1, 1_000_000, seed=0, noise_kind="bible")[0]
    assert len(ep.chunks) == 40_000
    ep.validate()


def test_one_task_and_length_gives_the_episodes_of_one_generator():
    """Mixing tasks or lengths changed nothing for a single task at a single length."""
    samples = generate_babi("qa2", 4, 7)
    noise = NoiseSource("mixed", 7)
    rng = random.Random("babilong-qa2-1000-7")
    expected = [
        make_babilong_episode(s, noise, 1000, rng, episode_id=f"babilong-qa2-1000-7-{i}")
        for i, s in enumerate(samples)
    ]
    assert babilong_dataset("qa2", 4, 1000, seed=7) == expected
    assert babilong_dataset(["qa2"], 4, [1000], seed=7) == expected


def test_several_tasks_share_n_and_interleave():
    mixed = babilong_dataset("qa1, qa2,qa3", 7, 500, seed=3)
    assert [e.meta["task"] for e in mixed] == ["qa1", "qa2", "qa3", "qa1", "qa2", "qa3", "qa1"]
    # each task's episodes are that task's single-task episodes
    assert [e for e in mixed if e.meta["task"] == "qa1"] == babilong_dataset("qa1", 3, 500, seed=3)
    assert [e for e in mixed if e.meta["task"] == "qa3"] == babilong_dataset("qa3", 2, 500, seed=3)
    assert babilong_dataset(["qa1", "qa2"], 4, 500, seed=3) == babilong_dataset(
        "qa1,qa2", 4, 500, seed=3
    )


def test_a_task_named_twice_gets_twice_the_share_of_distinct_samples():
    weighted = babilong_dataset(["qa1", "qa2", "qa2"], 9, 500, seed=4)
    assert [e.meta["task"] for e in weighted] == ["qa1", "qa2", "qa2"] * 3
    qa2 = [e for e in weighted if e.meta["task"] == "qa2"]
    assert len({e.id for e in qa2}) == 6
    # the same six stories a single-task call draws, not one story twice
    assert sorted(e.id for e in qa2) == sorted(
        e.id for e in babilong_dataset("qa2", 6, 500, seed=4)
    )
    assert len({tuple(e.chunks[i] for i in e.support) + (e.question,) for e in qa2}) > 1


def test_a_list_of_lengths_cycles_per_task():
    mixed = babilong_dataset("qa1", 4, [250, 1000], seed=2)
    assert [e.meta["target_tokens"] for e in mixed] == [250, 1000, 250, 1000]
    assert [len(e.chunks) for e in mixed] == [
        tokens_to_sentences(t) for t in (250, 1000, 250, 1000)
    ]
    assert len({e.id for e in mixed}) == 4


@pytest.mark.parametrize("task", ["", " , ", []])
def test_no_task_named_is_refused(task):
    with pytest.raises(ValueError, match="no bAbI task"):
        babilong_dataset(task, 2, 250, seed=0)
