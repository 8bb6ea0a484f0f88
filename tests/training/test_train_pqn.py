"""PQN pieces: soft-greedy policy, soft values, sampling, schedule, one learning step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from qrag_training.optim import lr_factor
from qrag_training.policy import (
    sample_actions,
    soft_greedy_probs,
    soft_values,
    uniform_probs,
)


def test_soft_greedy_restricted_to_top_k_available():
    q = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0]])
    mask = torch.tensor([[False, True, True, True, True, True]])
    probs = soft_greedy_probs(q, mask, alpha=1.0, top_k=2)
    expected = torch.softmax(torch.tensor([0.0, -1.0]), 0)
    torch.testing.assert_close(probs[0, 1:3], expected)
    assert probs[0, 0] == 0 and probs[0, 3:].sum() == 0
    greedy = soft_greedy_probs(q, mask, alpha=1e-4, top_k=5)
    assert greedy[0, 1].item() == pytest.approx(1.0)


def test_soft_values_per_head_top_k():
    q1 = torch.tensor([[1.0, 2.0, 3.0, 10.0]])
    q2 = torch.tensor([[0.5, 0.1, 0.2, 9.0]])
    mask = torch.tensor([[True, True, True, False]])
    alpha = 0.5
    v = soft_values(q1, q2, mask, alpha, top_k=2)
    v1 = alpha * math.log(math.exp(3 / alpha) + math.exp(2 / alpha))
    v2 = alpha * math.log(math.exp(0.5 / alpha) + math.exp(0.2 / alpha))
    assert v.item() == pytest.approx(v1 + v2, rel=1e-5)
    # a tiny alpha tends to the max; no chunk left gives 0
    assert soft_values(q1, q2, mask, 1e-4, 5).item() == pytest.approx(3.5, abs=1e-3)
    assert soft_values(q1, q2, torch.zeros_like(mask), 0.5, 5).item() == 0.0


def test_sampling_follows_probabilities_and_never_picks_masked():
    rng = np.random.default_rng(0)
    mask = torch.tensor([[True, False, True, True]] * 4000)
    probs = uniform_probs(mask)
    actions = sample_actions(probs, rng)
    assert set(actions.tolist()) == {0, 2, 3}
    counts = np.bincount(actions, minlength=4) / len(actions)
    np.testing.assert_allclose(counts[[0, 2, 3]], [1 / 3] * 3, atol=0.03)
    onehot = torch.tensor([[0.0, 0.0, 1.0]])
    assert sample_actions(onehot, rng).tolist() == [2]


def test_lr_schedule_warmup_then_linear_decay():
    assert lr_factor(0, 10, 110) == pytest.approx(0.1)
    assert lr_factor(9, 10, 110) == pytest.approx(1.0)
    assert lr_factor(10, 10, 110) == pytest.approx(1.0)
    assert lr_factor(60, 10, 110) == pytest.approx(0.5)
    assert lr_factor(110, 10, 110) == pytest.approx(0.0)
    assert lr_factor(500, 0, 100, final_ratio=0.1) == pytest.approx(0.1)


def agent_and_envs(tiny_bert_dir, **config):
    """A PQN agent on a tiny BERT and two environments of 2-pick episodes (truncated at the cap)."""
    from qrag_training.data.episode import Episode
    from qrag_training.env import EnvSettings, RetrievalEnv, VectorEnv
    from qrag_training.feedback import GroundTruthFeedback
    from qrag_training.pqn import PQNAgent, PQNConfig

    from qrag_integrations import QRAGConfig, QRAGModel

    torch.manual_seed(0)
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    # accumulate_grads=1: an optimiser step per rollout, so that updates count learn() calls
    settings = PQNConfig(
        warmup=2, total_updates=10, learning_start=4, lr=1e-3, accumulate_grads=1, **config
    )
    agent = PQNAgent(model, settings, seed=0)
    chunks = [
        "mary went to the kitchen.",
        "the cat is blue.",
        "john got the apple.",
        "the dog sat.",
    ]
    episodes = iter(
        [
            Episode(id=str(i), question="where is mary?", chunks=chunks, support=[0])
            for i in range(100)
        ]
    )
    envs = [
        RetrievalEnv(EnvSettings(max_steps=2), GroundTruthFeedback(), model.state_text)
        for _ in range(2)
    ]
    venv = VectorEnv(envs, lambda: next(episodes), agent)
    venv.reset()
    return model, agent, venv


@pytest.mark.parametrize("autocast", [None, "bf16"])
def test_agent_learns_and_updates_targets(tiny_bert_dir, autocast):
    model, agent, venv = agent_and_envs(tiny_bert_dir, autocast=autocast)
    assert agent.bf16 == (autocast == "bf16")
    before = {k: v.clone() for k, v in agent.target_tensors().items()}
    frozen = model.state_encoder.model.embeddings.word_embeddings.weight.clone()
    for _ in range(3):
        rollout = agent.collect(venv, 3)
        stats = agent.learn(rollout)
    assert rollout.rewards.shape == (3, 2) and math.isfinite(stats["loss"])
    assert agent.updates == 3 and agent.env_steps == 18
    assert agent.alpha == pytest.approx(max(1e-4, 0.01 * agent.lr / 1e-3))
    after = agent.target_tensors()
    assert set(after) == set(before) and any(not torch.equal(before[k], after[k]) for k in after)
    assert torch.equal(frozen, model.state_encoder.model.embeddings.word_embeddings.weight)
    # truncated transitions bootstrap from a recorded value of the final state ...
    assert rollout.truncated.any()
    cut = rollout.truncated
    agent.config.bootstrap_truncation = True
    g = agent.returns(rollout)
    torch.testing.assert_close(g[cut], rollout.rewards[cut] + 0.99 * rollout.next_values[cut])
    # ... unless the step cap is configured to end the return (reference behaviour)
    agent.config.bootstrap_truncation = False
    torch.testing.assert_close(agent.returns(rollout)[cut], rollout.rewards[cut])


@pytest.mark.parametrize("bootstrap", [False, True])
def test_final_states_are_valued_only_when_the_return_bootstraps_there(
    tiny_bert_dir, monkeypatch, bootstrap
):
    """The value of a truncated episode's final state costs a state encoding: it is computed
    only with ``bootstrap_truncation``; the default return ends at the step cap without it."""
    _, agent, venv = agent_and_envs(tiny_bert_dir, bootstrap_truncation=bootstrap)
    calls = []
    real = agent._final_values
    monkeypatch.setattr(agent, "_final_values", lambda *a: calls.append(1) or real(*a))
    rollout = agent.collect(venv, 3)
    cut = rollout.truncated
    assert cut.any()
    assert bool(calls) is bootstrap
    assert bool((rollout.next_values[cut] != 0).all()) is bootstrap
    g = agent.returns(rollout)
    expected = rollout.rewards[cut] + (0.99 * rollout.next_values[cut] if bootstrap else 0)
    torch.testing.assert_close(g[cut], expected)


def test_online_and_target_forward_shares_frozen_layers_exactly(tiny_bert_dir):
    import copy

    from qrag_training.target_forward import forward_online_and_target

    from qrag_integrations import QRAGConfig, QRAGModel

    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1)
    ).eval()
    target = copy.deepcopy(model.chunk_encoder)
    with torch.no_grad():
        for p in target.layers()[-1].parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = model.tokenize(["mary went to the kitchen.", "the dog."], 32)
    with torch.no_grad():
        online, tgt = forward_online_and_target(model.chunk_encoder, target, 1, batch)
        torch.testing.assert_close(online, model.chunk_encoder(**batch))
        torch.testing.assert_close(tgt, target(**batch))
        assert not torch.allclose(online, tgt)
    assert len(target.layers()) == 2 and all(
        type(m).__name__ != "_Replay" for m in target.modules()
    )
