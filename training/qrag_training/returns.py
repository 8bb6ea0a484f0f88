"""Q(lambda) returns over a PQN rollout: one small pure function.

A rollout holds ``T`` consecutive steps of ``B`` parallel environments, time-major ``(T, B)``.
For transition ``t`` of environment ``b``:

* ``rewards[t, b]``: reward received for the action at ``t``;
* ``terminated[t, b]``: the episode truly ended (no future rewards, ``V = 0`` after it);
* ``truncated[t, b]``: the episode was cut off (step cap); the next state still has a value;
* ``next_values[t, b]``: ``V(s_{t+1})`` of the true next state of transition ``t``, i.e. the
  final state of the episode when ``t`` ended it (not the first state of the next episode).

Backwards, ``G_t = r_t + gamma * (1 - term_t) * (lam * G_{t+1} + (1 - lam) * V_{t+1})``, where
``G_{t+1}`` is replaced by ``V_{t+1}`` when transition ``t`` ended its episode by truncation or is
the last step of the rollout: the return bootstraps from the value there and never continues into
the next episode.
"""

from __future__ import annotations

import torch


def q_lambda_returns(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    next_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Q(lambda) targets of a time-major rollout.

    Args:
        rewards: ``(T, B)`` rewards.
        terminated: ``(T, B)`` bool/0-1, the transition ended its episode for good.
        truncated: ``(T, B)`` bool/0-1, the transition ended its episode by the step cap.
        next_values: ``(T, B)`` ``V`` of each transition's true next state.
        gamma: discount.
        lam: lambda; 0 gives one-step TD targets, 1 Monte-Carlo returns bootstrapped where an
            episode was cut off or the rollout ends.

    Returns:
        ``(T, B)`` float tensor of returns (no gradient).
    """
    if not (rewards.shape == terminated.shape == truncated.shape == next_values.shape):
        raise ValueError(
            "rewards, terminated, truncated and next_values must have one shape, got "
            f"{tuple(rewards.shape)}, {tuple(terminated.shape)}, {tuple(truncated.shape)}, "
            f"{tuple(next_values.shape)}"
        )
    if rewards.dim() != 2:
        raise ValueError(f"expected time-major (T, B) tensors, got shape {tuple(rewards.shape)}")
    rewards = rewards.detach().to(torch.float32)
    values = next_values.detach().to(torch.float32)
    not_term = 1.0 - terminated.detach().to(torch.float32)
    # Where an episode ended (by either flag), the lambda-continuation G_{t+1} belongs to the
    # next episode: use V_{t+1} instead (multiplied by 0 below when terminated).
    cut = (terminated.detach().bool() | truncated.detach().bool()).to(torch.float32)
    returns = torch.empty_like(rewards)
    following = values[-1]  # the last step of the rollout bootstraps from V
    for t in range(rewards.shape[0] - 1, -1, -1):
        continuation = cut[t] * values[t] + (1.0 - cut[t]) * following
        mix = lam * continuation + (1.0 - lam) * values[t]
        returns[t] = rewards[t] + gamma * not_term[t] * mix
        following = returns[t]
    return returns
