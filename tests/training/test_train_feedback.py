"""Ground-truth reward: once at completion, extra-step penalty, shaping, termination flag."""

from __future__ import annotations

import pytest
from qrag_training.data.episode import Episode
from qrag_training.feedback import Feedback, GroundTruthFeedback
from qrag_training.feedback_kinds import build_feedback


def episode(support=(2, 5)):
    return Episode(id="e", question="q?", chunks=[f"c{i}" for i in range(8)], support=list(support))


def rewards(fb, ep, picks):
    return [fb.reward(ep, picks[: k + 1], k + 1) for k in range(len(picks))]


def test_reward_once_when_support_complete_with_penalty():
    fb = GroundTruthFeedback(penalize_extra_steps=True)
    got = rewards(fb, episode(), [0, 2, 7, 5, 1, 3])
    assert got[:3] == [0.0, 0.0, 0.0]
    assert got[3] == pytest.approx(0.5 + 0.5 * 2 / 4)
    assert got[4:] == [0.0, 0.0]


def test_no_penalty_gives_one_and_direct_hit_gives_one():
    assert rewards(GroundTruthFeedback(penalize_extra_steps=False), episode(), [0, 2, 7, 5]) == [
        0,
        0,
        0,
        1.0,
    ]
    assert rewards(GroundTruthFeedback(penalize_extra_steps=True), episode(), [5, 2])[
        -1
    ] == pytest.approx(1.0)


def test_per_fact_shaping():
    fb = GroundTruthFeedback(penalize_extra_steps=False, per_fact_shaping=True, per_fact_reward=0.1)
    got = rewards(fb, episode(), [2, 0, 5])
    assert got == pytest.approx([0.1, 0.0, 1.1])


def test_terminal_and_flags():
    fb = GroundTruthFeedback(never_terminate=False)
    assert not fb.terminal(episode(), [2])
    assert fb.terminal(episode(), [2, 5])
    assert GroundTruthFeedback().never_terminate is True
    assert isinstance(fb, Feedback)


def test_unlabeled_episode_never_rewards():
    fb = GroundTruthFeedback()
    assert rewards(fb, episode(support=()), [0, 1, 2]) == [0.0, 0.0, 0.0]
    assert not fb.terminal(episode(support=()), [0, 1])


def test_build_feedback():
    fb = build_feedback("ground_truth", penalize_extra_steps=False)
    assert isinstance(fb, GroundTruthFeedback) and fb.penalize_extra_steps is False
    with pytest.raises(
        ValueError, match="unknown feedback kind 'oracle'; known: ground_truth, llm"
    ):
        build_feedback("oracle")
