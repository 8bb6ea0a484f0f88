"""Q(lambda) returns against plain reference loops."""

from __future__ import annotations

import random

import pytest
import torch
from qrag_training.returns import q_lambda_returns


def backward_reference(rewards, term, trunc, values, gamma, lam):
    """Element-by-element backward recursion, written as plainly as possible."""
    t_len, b_len = len(rewards), len(rewards[0])
    out = [[0.0] * b_len for _ in range(t_len)]
    for b in range(b_len):
        following = None
        for t in reversed(range(t_len)):
            v_next = values[t][b]
            if term[t][b]:
                g = rewards[t][b]
            elif trunc[t][b] or t == t_len - 1:
                g = rewards[t][b] + gamma * v_next
            else:
                g = rewards[t][b] + gamma * (lam * following + (1 - lam) * v_next)
            out[t][b] = g
            following = g
    return out


def forward_view_reference(rewards, term, trunc, values, gamma, lam):
    """Lambda-return as the weighted sum of n-step returns (forward view), per environment.

    A transition at t whose episode segment ends at e (done, or the rollout end) has
    ``m = e - t + 1`` n-step returns; G^lam = (1-lam) sum_{n<m} lam^(n-1) G^(n) + lam^(m-1) G^(m).
    """
    t_len, b_len = len(rewards), len(rewards[0])
    out = [[0.0] * b_len for _ in range(t_len)]
    for b in range(b_len):
        for t in range(t_len):
            e = t
            while e < t_len - 1 and not (term[e][b] or trunc[e][b]):
                e += 1
            m = e - t + 1

            def n_step(n, t=t, b=b):
                g = sum(gamma**k * rewards[t + k][b] for k in range(n))
                last = t + n - 1
                bootstrap = 0.0 if term[last][b] else values[last][b]
                return g + gamma**n * bootstrap

            total = sum((1 - lam) * lam ** (n - 1) * n_step(n) for n in range(1, m))
            out[t][b] = total + lam ** (m - 1) * n_step(m)
    return out


def random_rollout(seed, t_len=9, b_len=5):
    rng = random.Random(seed)
    rewards = [[rng.choice([0.0, 0.0, 1.0, 0.7]) for _ in range(b_len)] for _ in range(t_len)]
    values = [[rng.uniform(-0.5, 1.5) for _ in range(b_len)] for _ in range(t_len)]
    term = [[False] * b_len for _ in range(t_len)]
    trunc = [[False] * b_len for _ in range(t_len)]
    for t in range(t_len):
        for b in range(b_len):
            r = rng.random()
            if r < 0.15:
                term[t][b] = True
            elif r < 0.3:
                trunc[t][b] = True
    return rewards, term, trunc, values


def run(rewards, term, trunc, values, gamma, lam):
    return q_lambda_returns(
        torch.tensor(rewards),
        torch.tensor(term),
        torch.tensor(trunc),
        torch.tensor(values),
        gamma,
        lam,
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [0.0, 0.5, 0.65, 1.0])
def test_matches_reference_loops(seed, lam):
    rollout = random_rollout(seed)
    got = run(*rollout, 0.9, lam)
    back = torch.tensor(backward_reference(*rollout, 0.9, lam))
    fwd = torch.tensor(forward_view_reference(*rollout, 0.9, lam))
    torch.testing.assert_close(got, back, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, fwd, rtol=1e-5, atol=1e-5)


def test_lambda_zero_is_one_step_td():
    rewards, term, trunc, values = random_rollout(11)
    got = run(rewards, term, trunc, values, 0.99, 0.0)
    r, v = torch.tensor(rewards), torch.tensor(values)
    expected = r + 0.99 * (1 - torch.tensor(term).float()) * v
    torch.testing.assert_close(got, expected)


def test_lambda_one_is_monte_carlo_with_bootstrap_at_the_end():
    # One environment, no episode end inside: discounted sum plus gamma^T * V at the end.
    rewards = [[0.0], [1.0], [0.0], [0.5]]
    values = [[9.0], [9.0], [9.0], [2.0]]
    no = [[False]] * 4
    got = run(rewards, no, no, values, 0.5, 1.0)[:, 0]
    expected = torch.tensor(
        [
            0 + 0.5 * 1 + 0.25 * 0 + 0.125 * 0.5 + 0.0625 * 2,
            1 + 0.5 * 0 + 0.25 * 0.5 + 0.125 * 2,
            0 + 0.5 * 0.5 + 0.25 * 2,
            0.5 + 0.5 * 2,
        ]
    )
    torch.testing.assert_close(got, expected)


def test_truncation_bootstraps_and_does_not_leak_into_next_episode():
    # Step 1 ends an episode by truncation; step 2 starts a new one with a big reward.
    rewards = [[0.0], [0.0], [10.0]]
    values = [[1.0], [3.0], [0.0]]
    trunc = [[False], [True], [False]]
    term = [[False], [False], [True]]
    got = run(rewards, term, trunc, values, 0.9, 1.0)[:, 0]
    assert got[1].item() == pytest.approx(0.9 * 3.0)  # bootstraps from V(final state)
    assert got[0].item() == pytest.approx(0.9 * got[1].item())
    assert got[2].item() == pytest.approx(10.0)


def test_termination_cuts_the_value():
    got = run([[1.0]], [[True]], [[False]], [[5.0]], 0.9, 0.65)
    assert got.item() == pytest.approx(1.0)


def test_shape_checks():
    with pytest.raises(ValueError):
        q_lambda_returns(
            torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(2, 2), 0.9, 0.5
        )
    with pytest.raises(ValueError):
        q_lambda_returns(torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(3), 0.9, 0.5)
