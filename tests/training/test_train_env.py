"""Retrieval environment: picks, mask, positions, state text, termination vs truncation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from qrag_training.data.episode import Episode
from qrag_training.env import EnvSettings, EpisodeStream, RetrievalEnv, VectorEnv
from qrag_training.feedback import GroundTruthFeedback

from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.positions import layout


def state_text(question, picked, order):
    texts = [t for _, t in sorted(zip(order, picked))]
    return " [SEP] ".join([question, *texts])


def make_episode(n=10, support=(3, 7), name="e"):
    return Episode(
        id=name, question="Where?", chunks=[f"s{i}." for i in range(n)], support=list(support)
    )


def make_env(max_steps=3, mode=PositionMode.RELATIVE, never_terminate=True):
    return RetrievalEnv(
        EnvSettings(max_steps=max_steps, position_mode=mode),
        GroundTruthFeedback(never_terminate=never_terminate),
        state_text,
    )


def test_positions_mask_and_state_text_follow_picks():
    env = make_env()
    ep = make_episode()
    assert env.reset(ep) == "Where?"
    np.testing.assert_array_equal(env.positions, layout(PositionMode.RELATIVE, 10, [], 20, 0.9))
    before = env.positions.copy()
    env.step(7)
    assert env.picked == [7] and not env.mask[7] and env.mask.sum() == 9
    np.testing.assert_array_equal(env.positions, layout(PositionMode.RELATIVE, 10, [7], 20, 0.9))
    assert not np.array_equal(before, env.positions)
    assert env.positions[7] == 20 and env.positions[8] > 20  # a pick opens a new segment
    env.step(2)
    assert env.state_text() == "Where? [SEP] s2. [SEP] s7."  # document order
    with pytest.raises(ValueError):
        env.step(2)  # already picked


def test_truncation_at_step_cap_is_not_termination():
    env = make_env(max_steps=3)
    env.reset(make_episode())
    results = [env.step(a) for a in (0, 1, 3)]
    assert [r.truncated for r in results] == [False, False, True]
    assert not any(r.terminated for r in results)
    assert results[-1].done


def test_termination_when_solved_or_exhausted():
    env = make_env(max_steps=5, never_terminate=False)
    env.reset(make_episode())
    first, second = env.step(3), env.step(7)
    assert not first.done
    assert second.terminated and not second.truncated and second.reward == pytest.approx(1.0)

    env = make_env(max_steps=5)
    env.reset(make_episode(n=2, support=(0,)))
    env.step(1)
    last = env.step(0)
    assert last.terminated and not last.truncated  # no chunk left


@pytest.mark.parametrize("mode", [PositionMode.NONE, PositionMode.ABSOLUTE])
def test_other_position_modes(mode):
    env = make_env(mode=mode)
    env.reset(make_episode())
    env.step(4)
    np.testing.assert_array_equal(env.positions, layout(mode, 10, [4], 20, 0.9))


class FakeEmbedder:
    """Chunk i of an episode gets embedding filled with i (online) and -i (target)."""

    def embed_chunk_lists(self, chunk_lists):
        out = []
        for chunks in chunk_lists:
            base = torch.arange(len(chunks), dtype=torch.float32)[:, None].repeat(1, 8)
            out.append((base, -base))
        return out

    def rotate(self, emb, positions):
        return emb + positions[..., None].float() * 1000


def test_vector_env_auto_reset_and_views():
    episodes = iter([make_episode(6, name=f"e{i}") for i in range(10)])
    venv = VectorEnv(
        [make_env(max_steps=2) for _ in range(3)], lambda: next(episodes), FakeEmbedder()
    )
    assert venv.reset() == ["Where?"] * 3
    rotated, mask = venv.rotated(), venv.masks()
    assert rotated.shape == (3, 6, 8) and mask.all()
    start = layout(PositionMode.RELATIVE, 6, [], 20, 0.9)
    assert venv.rotated(target=True)[0, 2, 0].item() == pytest.approx(-2.0 + 1000 * start[2])
    first = venv.step([3, 3, 3])
    assert first.action_positions.tolist() == [int(start[3])] * 3
    assert not first.truncated.any() and first.finals == [None] * 3
    assert venv.masks()[:, 3].logical_not().all()
    second = venv.step([0, 1, 2])
    assert second.truncated.all() and not second.terminated.any()
    final = second.finals[0]
    assert final is not None and final.state_text == "Where? [SEP] s0. [SEP] s3."
    assert not final.mask[0] and not final.mask[3]
    assert len(second.episode_returns) == 3
    assert [e.episode.id for e in venv.envs] == ["e3", "e4", "e5"]  # auto-reset to new episodes
    assert venv.masks().all()


def test_episode_stream_resumes_exactly():
    pools = {p: [make_episode(name=f"p{p}-{i}") for i in range(4)] for p in range(5)}
    a = EpisodeStream(lambda p: pools[p], seed=3, refresh=True)
    first = [a().id for _ in range(6)]
    state = a.state_dict()
    rest = [a().id for _ in range(5)]
    b = EpisodeStream(lambda p: pools[p], seed=3, refresh=True)
    b.load_state_dict(state)
    assert [b().id for _ in range(5)] == rest
    assert {i.split("-")[0] for i in first} == {"p0", "p1"}
    assert sorted(first[:4]) == [f"p0-{i}" for i in range(4)]  # a pass is a permutation
