"""The supervised next-hop warm start: hop states, the loss against a plain loop, learning."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from qrag_training.data.episode import Episode
from qrag_training.distill import InitTeacher, distill_loss
from qrag_training.hop_states import recovery_states
from qrag_training.next_hop import (
    HopState,
    NextHopConfig,
    NextHopLearner,
    frozen_chunk_cache,
    hop_states,
    next_hop_loss,
)

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.model import QRAGModel


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


def test_recovery_states_follow_a_wrong_first_pick_back_to_every_gold() -> None:
    episodes = _episodes() + [Episode(id="x", question="q", chunks=["a", "b"], support=[0, 1])]
    rng = np.random.default_rng(0)
    states = recovery_states(episodes, 1.0, rng)
    # the last episode has no chunk besides its golds: no wrong pick to make
    assert [s.episode for s in states] == [0, 1, 2, 3]
    for s in states:
        assert len(s.picked) == 1 and s.picked[0] not in (0, 2) and s.targets == [0, 2]
    assert recovery_states(episodes, 0.0, rng) == []
    drawn = [len(recovery_states(episodes[:4], 0.5, rng)) for _ in range(200)]
    assert 1.5 < np.mean(drawn) < 2.5
    with pytest.raises(ValueError, match="recovery_states must be in"):
        NextHopConfig(recovery_states=1.5)


def test_a_step_with_recovery_states_trains_them(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()
    cfg = NextHopConfig(questions_per_step=4, in_batch_negatives=False, recovery_states=1.0)
    learner = NextHopLearner(model, cfg, seed=0)
    it = iter(_episodes())
    stats = learner.step(lambda: next(it))
    assert math.isfinite(stats["loss"])
    assert learner.env_steps == 4 * 2 + 4  # two gold-prefix states and one recovery state each


def test_loss_equals_a_plain_loop() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 6, generator=g)
    available = torch.tensor(
        [[1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 1], [1, 1, 0, 0, 1, 1]], dtype=torch.bool
    )
    positive = torch.zeros(3, 6, dtype=torch.bool)
    positive[0, [1, 4]] = True
    positive[1, 2] = True
    positive[2, [0, 2]] = True  # 2 is unavailable: it must not count
    t = 0.1
    expected = []
    for row in range(3):
        z = sum(math.exp(float(q[row, j]) / t) for j in range(6) if available[row, j])
        p = sum(
            math.exp(float(q[row, j]) / t)
            for j in range(6)
            if available[row, j] and positive[row, j]
        )
        expected.append(-math.log(p / z))
    assert float(next_hop_loss(q, available, positive, t)) == pytest.approx(
        sum(expected) / 3, rel=1e-5
    )


def _episodes() -> list[Episode]:
    facts = [
        "mary went to the kitchen",
        "john took the milk there",
        "sandra is in the office",
        "the cat is blue",
        "daniel went to the garden",
        "fred dropped the apple",
    ]
    out = []
    for i in range(4):
        chunks = facts[i:] + facts[:i]
        out.append(
            Episode(
                id=str(i),
                question=f"where is {chunks[0].split()[0]}",
                chunks=chunks,
                support=[0, 2],
            )
        )
    return out


@pytest.mark.parametrize("autocast", [None, "bf16"])
def test_learner_step_lowers_the_loss_and_counts(tiny_bert_dir: Path, autocast: str | None) -> None:
    torch.manual_seed(0)
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1)
    ).eval()
    # the episodes share their chunks, so other episodes' chunks would be contradictory negatives
    cfg = NextHopConfig(
        questions_per_step=4,
        lr=3e-3,
        warmup=1,
        total_updates=30,
        dropout=False,
        in_batch_negatives=False,
        autocast=autocast,
    )
    learner = NextHopLearner(model, cfg, seed=0)
    assert learner.bf16 == (autocast == "bf16")
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


def test_autocast_setting_is_checked_and_auto_follows_the_machine(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="autocast must be null, bf16 or auto, got 'fp8'"):
        NextHopConfig(autocast="fp8")
    from qrag_integrations.core import precision

    cpu = torch.device("cpu")
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert NextHopConfig(autocast="auto").bf16_on(cpu)
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"avx2"}))
    assert not NextHopConfig(autocast="auto").bf16_on(cpu)
    assert NextHopConfig(autocast="bf16").bf16_on(cpu) and not NextHopConfig().bf16_on(cpu)


def test_freeze_chunk_encoder_trains_the_state_encoder_only(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    before = {k: v.clone() for k, v in model.trained_state_dict().items()}
    cfg = NextHopConfig(
        questions_per_step=4,
        in_batch_negatives=False,
        freeze_chunk_encoder=True,
        frozen_cache_mb=64,
    )
    learner = NextHopLearner(model, cfg, seed=0)
    it = itertools.cycle(_episodes())
    for _ in range(3):
        learner.step(lambda: next(it))
    after = model.trained_state_dict()
    chunk = [k for k in before if k.startswith("chunk_encoder.")]
    state = [k for k in before if k.startswith("state_encoder.")]
    assert chunk and state
    assert all(torch.equal(before[k], after[k]) for k in chunk)
    assert any(not torch.equal(before[k], after[k]) for k in state)
    # a frozen encoder's outputs are cached whole, from eval mode: the same as inference's
    assert learner.chunk_cache is not None
    assert learner.chunk_cache.frozen == len(model.chunk_encoder.layers())
    texts = _episodes()[0].chunks
    model.train(True)
    with torch.no_grad():
        cached = learner.chunk_cache.embed(texts)
    torch.testing.assert_close(
        cached, model.eval().embed_chunks(texts), atol=2e-3, rtol=0
    )  # fp16 cache


def test_a_whole_frozen_encoder_is_cached_without_trainable_layers(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir)))
    for p in model.chunk_encoder.parameters():
        p.requires_grad_(False)
    cache = frozen_chunk_cache(model, 64, whole=True)
    assert cache is not None and cache.frozen == len(model.chunk_encoder.layers())
    with pytest.raises(ValueError, match="needs model.trainable_layers"):
        frozen_chunk_cache(model, 64)


def test_in_batch_negatives_need_unrotated_chunks(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), position_mode=PositionMode.RELATIVE)
    )
    with pytest.raises(ValueError, match="position_mode none"):
        NextHopLearner(model, NextHopConfig())
    learner = NextHopLearner(model, NextHopConfig(in_batch_negatives=False, questions_per_step=2))
    it = iter(_episodes())
    stats = learner.step(lambda: next(it))
    assert math.isfinite(stats["loss"]) and 0.0 <= stats["hop_accuracy"] <= 1.0


def test_distill_loss_equals_a_plain_loop() -> None:
    g = torch.Generator().manual_seed(1)
    q, teacher = torch.randn(2, 5, generator=g), torch.randn(2, 5, generator=g)
    available = torch.tensor([[1, 1, 1, 1, 1], [1, 0, 1, 1, 0]], dtype=torch.bool)
    t, tt = 0.2, 0.1
    expected = []
    for row in range(2):
        cols = [j for j in range(5) if available[row, j]]
        zs = sum(math.exp(float(q[row, j]) / t) for j in cols)
        zt = sum(math.exp(float(teacher[row, j]) / tt) for j in cols)
        kl = 0.0
        for j in cols:
            pt = math.exp(float(teacher[row, j]) / tt) / zt
            ps = math.exp(float(q[row, j]) / t) / zs
            kl += pt * math.log(pt / ps)
        expected.append(kl)
    assert float(distill_loss(q, teacher, available, t, tt)) == pytest.approx(
        sum(expected) / 2, rel=1e-5
    )
    assert float(distill_loss(teacher * (t / tt), teacher, available, t, tt)) == pytest.approx(
        0.0, abs=1e-6
    )


def test_distillation_pulls_first_picks_toward_the_base_ranking(tiny_bert_dir: Path) -> None:
    """With the distillation term weighing far more than the hop loss, the policy's
    question-only ranking moves toward the untrained base encoder's."""
    torch.manual_seed(0)
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=2)
    ).eval()
    # scramble the trained layers so the policy starts far from the base ranking
    with torch.no_grad():
        for name, p in model.chunk_encoder.named_parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.5)
    cfg = NextHopConfig(
        questions_per_step=4,
        lr=1e-3,
        warmup=1,
        total_updates=40,
        dropout=False,
        in_batch_negatives=False,
        distill_weight=100.0,
        distill_temperature=0.1,
        temperature=0.1,
    )
    learner = NextHopLearner(model, cfg, seed=0)
    assert learner.teacher is not None and not any(
        p.requires_grad for p in learner.teacher.encoder.parameters()
    )
    it = iter(_episodes() * 100)
    stats = [learner.step(lambda: next(it)) for _ in range(30)]
    assert {"hop_loss", "distill_loss"} <= set(stats[0])
    assert np.mean([s["distill_loss"] for s in stats[-5:]]) < 0.7 * np.mean(
        [s["distill_loss"] for s in stats[:5]]
    )
    assert NextHopLearner(model, NextHopConfig(in_batch_negatives=False)).teacher is None


def test_init_teacher_is_the_starting_model_frozen(tiny_bert_dir: Path) -> None:
    """The ``init`` teacher scores question-only states as the model did when the run started:
    the first distillation term is zero (same temperatures, no dropout) and stays a fixed
    reference while the policy learns."""
    torch.manual_seed(0)
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=2)
    ).eval()
    cfg = NextHopConfig(
        questions_per_step=4,
        lr=3e-3,
        warmup=1,
        total_updates=20,
        dropout=False,
        in_batch_negatives=False,
        distill_weight=1.0,
        distill_teacher="init",
        distill_temperature=0.1,
        temperature=0.1,
    )
    learner = NextHopLearner(model, cfg, seed=0)
    assert isinstance(learner.teacher, InitTeacher)
    frozen = learner.teacher.model
    assert frozen is not model and not any(p.requires_grad for p in frozen.parameters())
    before = {k: v.clone() for k, v in frozen.state_dict().items()}
    it = iter(_episodes() * 100)
    stats = [learner.step(lambda: next(it)) for _ in range(10)]
    assert stats[0]["distill_loss"] == pytest.approx(0.0, abs=1e-5)
    assert stats[-1]["distill_loss"] > 1e-4  # the policy moved away, the teacher did not
    assert all(torch.equal(v, frozen.state_dict()[k]) for k, v in before.items())
    episode = _episodes()[0]
    with torch.no_grad():
        policy = model.q_values(
            model.embed_states([episode.question]),
            model.embed_chunks(episode.chunks),
            torch.zeros(len(episode.chunks), dtype=torch.long),
        )
        teacher = learner.teacher.scores(model, [episode.question], episode.chunks, 8)
    assert not torch.allclose(policy, teacher)


def test_a_resumed_run_distils_toward_the_weights_it_started_from(tiny_bert_dir: Path) -> None:
    """``start`` (what the trainer passes when it resumes) is what the init teacher copies."""
    torch.manual_seed(0)
    start = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=2))
    resumed = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=2))
    with torch.no_grad():
        for p in resumed.state_encoder.parameters():
            p.add_(0.1)
    cfg = NextHopConfig(in_batch_negatives=False, distill_weight=1.0, distill_teacher="init")
    teacher = NextHopLearner(resumed, cfg, start=start).teacher
    assert isinstance(teacher, InitTeacher)
    for name, value in teacher.model.state_dict().items():
        assert torch.equal(value, start.state_dict()[name])
    assert not torch.equal(
        next(teacher.model.state_encoder.parameters()), next(resumed.state_encoder.parameters())
    )


def test_anchored_states_are_what_the_search_scores(tiny_bert_dir: Path) -> None:
    """With ``anchor_states``, a state after the first pick is trained as
    ``(E_s(state) + w E_s(question)) / (1 + w)``; question-only states are left as they are."""
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), question_weight=2.0)
    ).eval()
    learner = NextHopLearner(model, NextHopConfig(in_batch_negatives=False, anchor_states=True))
    episodes = _episodes()[:2]
    states = [HopState(0, [], [0, 2]), HopState(0, [0], [2]), HopState(1, [2], [0])]
    texts = [
        model.state_text(
            episodes[s.episode].question, [episodes[s.episode].chunks[j] for j in s.picked]
        )
        for s in states
    ]
    with torch.no_grad():
        raw = model.embed_states(texts)
        anchored = learner._anchored(episodes, states, raw)
        questions = model.embed_states([e.question for e in episodes])
    assert torch.allclose(anchored[0], raw[0])
    for row, s in [(1, states[1]), (2, states[2])]:
        expected = (raw[row] + 2.0 * questions[s.episode]) / 3.0
        assert torch.allclose(anchored[row], expected, atol=1e-6)


def test_distill_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="distill_weight"):
        NextHopConfig(distill_weight=-1.0)
    with pytest.raises(ValueError, match="distill_temperature"):
        NextHopConfig(distill_temperature=0.0)
    with pytest.raises(ValueError, match="distill_teacher must be one of"):
        NextHopConfig(distill_teacher="teacher")


def test_chunk_embeddings_in_length_batches_equal_one_batch(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()
    texts = [" ".join(["word"] * (1 + (i * 7) % 23)) + f" {i}" for i in range(50)]
    whole = model.embed_chunks_grad(texts, batch_size=len(texts))
    pieces = model.embed_chunks_grad(texts, batch_size=8)
    assert torch.allclose(whole, pieces, atol=1e-5)
    pieces.sum().backward()  # still differentiable
    assert any(p.grad is not None for p in model.chunk_encoder.parameters())
