"""The supervised next-hop warm start: hop states, the loss against a plain loop, learning."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from qrag_integrations.config import PositionMode, QRAGConfig
from qrag_integrations.model import QRAGModel
from qrag_training.data.episode import Episode
from qrag_training.next_hop import NextHopConfig, NextHopLearner, hop_states, next_hop_loss


def test_hop_states_walk_the_gold_chunks_in_a_random_order() -> None:
    rng = np.random.default_rng(0)
    states = hop_states([[3, 7], [], [1, 4, 6]], per_question=3, rng=rng)
    assert [s.episode for s in states] == [0, 0, 2, 2, 2]
    first = states[0]
    assert first.picked == [] and sorted(first.targets) == [3, 7]
    assert states[1].picked == [first.targets[0]] and states[1].targets == [first.targets[1]]
    three = states[2:]
    assert [len(s.picked) for s in three] == [0, 1, 2]
    assert sorted(three[2].picked + three[2].targets) == [1, 4, 6]
    assert len(hop_states([[1, 2, 3]], per_question=1, rng=rng)) == 1


def test_loss_equals_a_plain_loop() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 6, generator=g)
    available = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 1], [1, 1, 0, 0, 1, 1]], dtype=torch.bool)
    positive = torch.zeros(3, 6, dtype=torch.bool)
    positive[0, [1, 4]] = True
    positive[1, 2] = True
    positive[2, [0, 2]] = True  # 2 is unavailable: it must not count
    t = 0.1
    expected = []
    for row in range(3):
        z = sum(math.exp(float(q[row, j]) / t) for j in range(6) if available[row, j])
        p = sum(math.exp(float(q[row, j]) / t) for j in range(6) if available[row, j] and positive[row, j])
        expected.append(-math.log(p / z))
    assert float(next_hop_loss(q, available, positive, t)) == pytest.approx(sum(expected) / 3, rel=1e-5)


def _episodes() -> list[Episode]:
    facts = ["mary went to the kitchen", "john took the milk there", "sandra is in the office",
             "the cat is blue", "daniel went to the garden", "fred dropped the apple"]
    out = []
    for i in range(4):
        chunks = facts[i:] + facts[:i]
        out.append(Episode(id=str(i), question=f"where is {chunks[0].split()[0]}", chunks=chunks, support=[0, 2]))
    return out


def test_learner_step_lowers_the_loss_and_counts(tiny_bert_dir: Path) -> None:
    torch.manual_seed(0)
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1)).eval()
    # the episodes share their chunks, so other episodes' chunks would be contradictory negatives
    cfg = NextHopConfig(questions_per_step=4, lr=3e-3, warmup=1, total_updates=30, dropout=False,
                        in_batch_negatives=False)
    learner = NextHopLearner(model, cfg, seed=0)
    episodes = _episodes()
    it = iter(episodes * 100)
    losses = [learner.step(lambda: next(it))["loss"] for _ in range(25)]
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])
    assert learner.updates == 25 and learner.env_steps == 25 * 4 * 2
    scalars = learner.scalars()
    again = NextHopLearner(model, cfg, seed=1)
    again.optimizer.load_state_dict(learner.optimizer.state_dict())  # as the trainer resumes
    again.load_scalars(scalars)
    assert again.updates == 25 and again.lr == pytest.approx(learner.lr)
    assert learner.target_tensors() == {}
    with pytest.raises(ValueError, match="no target tensors"):
        learner.load_target_tensors({"target_x": torch.zeros(1)})


def test_in_batch_negatives_need_unrotated_chunks(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), position_mode=PositionMode.RELATIVE))
    with pytest.raises(ValueError, match="position_mode none"):
        NextHopLearner(model, NextHopConfig())
    learner = NextHopLearner(model, NextHopConfig(in_batch_negatives=False, questions_per_step=2))
    it = iter(_episodes())
    stats = learner.step(lambda: next(it))
    assert math.isfinite(stats["loss"]) and 0.0 <= stats["hop_accuracy"] <= 1.0
