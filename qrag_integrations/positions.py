"""Chunk position layouts (none / absolute / relative) and the RoPE rotation they drive.

Positions are integers: the reference implementation looks rotation angles up in an integer
table, so a relative layout ``linspace(0, 18, n)`` is floored. Integer positions also make runs
of neighbouring chunks share one position, which the search exploits (see ``search.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from qrag_integrations.config import PositionMode


def relative_layout(n: int, picked_ranks: Sequence[int], step: int, span: float) -> np.ndarray:
    """Positions of ``n`` chunks given the ranks (in document order) of the picked ones.

    Each picked chunk opens a new segment; segment ``j`` gets
    ``j * step + floor(linspace(0, int(span * step), len(segment)))``.

    Args:
        n: number of chunks in document order.
        picked_ranks: ranks in ``[0, n)`` of picked chunks, any order.
        step: distance between segments.
        span: fraction of ``step`` a segment spreads over.

    Returns:
        int64 array of shape ``(n,)``.
    """
    max_value = int(span * step)
    out = np.empty(n, dtype=np.int64)
    bounds = sorted(set(int(r) for r in picked_ranks)) + [n]
    start, offset = 0, 0
    for end in bounds:
        if end > start:
            out[start:end] = offset + np.floor(np.linspace(0.0, max_value, end - start))
            start = end
        offset += step
    return out


def relative_runs(
    n: int, picked_ranks: Sequence[int], step: int, span: float
) -> list[tuple[int, int, int]]:
    """The relative layout as runs ``(start, stop, position)`` of equal positions.

    Same positions as :func:`relative_layout` without materialising ``n`` values: the number of
    runs is at most ``(int(span * step) + 1) * (len(picked_ranks) + 1)``.
    """
    max_value = int(span * step)
    runs: list[tuple[int, int, int]] = []
    bounds = sorted(set(int(r) for r in picked_ranks)) + [n]
    start, offset = 0, 0
    for end in bounds:
        length = end - start
        if length > 0:
            if length == 1:
                runs.append((start, end, offset))
            else:
                # floor(v * max_value / (length - 1)) == p  <=>  v in [ceil(p*(L-1)/M), ...)
                values = np.arange(max_value + 1)
                firsts = np.ceil(values * (length - 1) / max_value).astype(np.int64)
                firsts = np.append(firsts, length)
                for p in range(max_value + 1):
                    a, b = int(firsts[p]), int(min(firsts[p + 1], length))
                    if b > a:
                        runs.append((start + a, start + b, offset + p))
            start = end
        offset += step
    return runs


def layout(mode: PositionMode, n: int, picked_ranks: Sequence[int], step: int, span: float) -> np.ndarray:
    """Positions of ``n`` chunks in document order for any position mode."""
    if mode is PositionMode.RELATIVE:
        return relative_layout(n, picked_ranks, step, span)
    if mode is PositionMode.ABSOLUTE:
        return np.arange(n, dtype=np.int64)
    return np.zeros(n, dtype=np.int64)


def layout_runs(
    mode: PositionMode, n: int, picked_ranks: Sequence[int], step: int, span: float
) -> list[tuple[int, int, int]] | None:
    """Runs of equal positions, or ``None`` when every chunk has its own (absolute mode)."""
    if mode is PositionMode.RELATIVE:
        return relative_runs(n, picked_ranks, step, span)
    if mode is PositionMode.NONE:
        return [(0, n, 0)] if n else []
    return None


def rope_inv_freq(dim: int, theta: float, device: torch.device | str | None = None) -> torch.Tensor:
    """Inverse frequencies for a RoPE over ``dim`` features (``dim // 2`` rotated pairs)."""
    return 1.0 / (theta ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))


def rotate(
    emb: torch.Tensor, positions: torch.Tensor, theta: float, inverse: bool = False
) -> torch.Tensor:
    """Rotate embeddings by their positions, each half of the features separately.

    Features are rotated in interleaved pairs ``(x[2i], x[2i+1])`` (the layout of
    ``rotary_embedding_torch``), with the same angles in both halves, which is what the twin heads
    need: ``Q1`` uses the first half and ``Q2`` the second.

    Args:
        emb: ``(..., D)`` with ``D % 4 == 0``.
        positions: integer positions broadcastable to ``emb.shape[:-1]``.
        theta: RoPE base.
        inverse: rotate by ``-position`` (turns ``<s, R(p) a>`` into ``<R(-p) s, a>``).

    Returns:
        Rotated tensor, same shape and dtype as ``emb``.
    """
    dim = emb.shape[-1]
    if dim % 4:
        raise ValueError(f"embedding size must be divisible by 4 for twin-head RoPE, got {dim}")
    half = dim // 2
    inv_freq = rope_inv_freq(half, theta, device=emb.device)
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # (..., half // 2)
    angles = angles.repeat_interleave(2, dim=-1)  # (..., half)
    angles = torch.cat([angles, angles], dim=-1)  # (..., dim)
    cos, sin = angles.cos(), angles.sin()
    if inverse:
        sin = -sin
    x = emb.to(torch.float32)
    pairs = x.unflatten(-1, (-1, 2))
    rotated_half = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return (x * cos + rotated_half * sin).to(emb.dtype)
