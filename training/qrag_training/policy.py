"""The PQN policy and values as pure functions of Q-values: soft-greedy over the top-k available
chunks, uniform exploration, action sampling and soft values."""

from __future__ import annotations

import numpy as np
import torch


def _masked_top_k(q: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """``(B, N)`` bool: the top-``k`` available entries of each row."""
    masked = q.masked_fill(~mask, float("-inf"))
    k = min(k, q.shape[-1])
    idx = masked.topk(k, dim=-1).indices
    top = torch.zeros_like(mask).scatter_(-1, idx, True)
    return top & mask


def soft_greedy_probs(
    q: torch.Tensor, mask: torch.Tensor, alpha: float, top_k: int
) -> torch.Tensor:
    """Policy ``softmax((Q - max Q) / alpha)`` restricted to the top-k available chunks.

    Args:
        q: ``(B, N)`` Q-values (``Q1 + Q2``).
        mask: ``(B, N)`` bool, available chunks; every row needs at least one.
        alpha: temperature.
        top_k: size of the candidate set.

    Returns:
        ``(B, N)`` float32 probabilities, zero outside the candidate set.
    """
    q = q.to(torch.float32)
    keep = _masked_top_k(q, mask, top_k)
    logits = (q - q.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)) / alpha
    return logits.masked_fill(~keep, float("-inf")).softmax(-1)


def uniform_probs(mask: torch.Tensor) -> torch.Tensor:
    """Uniform distribution over the available chunks of each row."""
    m = mask.to(torch.float32)
    return m / m.sum(-1, keepdim=True).clamp(min=1.0)


def sample_actions(probs: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
    """One index per row of ``probs`` drawn with a numpy generator (device-independent)."""
    p = probs.detach().to("cpu", torch.float64).numpy()
    cum = np.cumsum(p, axis=-1)
    u = rng.random(p.shape[0]) * cum[:, -1]
    actions = (cum < u[:, None]).sum(-1)
    # Guard against rounding at the upper end: never return a zero-probability index.
    last = np.array([np.flatnonzero(row > 0)[-1] for row in p])
    return np.minimum(actions, last).astype(np.int64)


def soft_values(
    q1: torch.Tensor, q2: torch.Tensor, mask: torch.Tensor, alpha: float, top_k: int
) -> torch.Tensor:
    """``V = sum_h alpha * logsumexp(Q_h / alpha)`` over each head's top-k available chunks.

    Rows without any available chunk get 0 (such states only follow terminations).
    """
    out = torch.zeros(q1.shape[0], dtype=torch.float32, device=q1.device)
    any_left = mask.any(-1)
    for q in (q1.to(torch.float32), q2.to(torch.float32)):
        keep = _masked_top_k(q, mask, top_k)
        v = alpha * torch.logsumexp(q.masked_fill(~keep, float("-inf")) / alpha, dim=-1)
        out = out + torch.where(any_left, v, torch.zeros_like(v))
    return out
