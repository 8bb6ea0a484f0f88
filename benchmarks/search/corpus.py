"""The synthetic corpus of ``search/run.py``: real texts (Shakespeare lines, made unique) with
random embeddings scaled to the norms of real ones (embedding 400K real texts on a 2-core CPU
takes hours; scan costs do not depend on the values)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def make_texts(n: int, lines: list[str]) -> list[str]:
    """``n`` unique chunk texts of two consecutive real lines each (~80 characters)."""
    m = len(lines)
    return [f"{lines[i % m]} {lines[(i + 1) % m]}" for i in range(n)]


def make_embeddings(n: int, dim: int, real_norms: np.ndarray, seed: int) -> torch.Tensor:
    """Random directions, each scaled to a norm drawn from the measured real norms."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x *= rng.choice(real_norms, size=(n, 1)).astype(np.float32)
    return torch.from_numpy(x)


def measure_real_norms(model: Any, lines: list[str], count: int = 256) -> np.ndarray:
    """Norms of real chunk embeddings of ``count`` texts spread over ``lines``."""
    step = max(1, len(lines) // count)
    sample = [f"{lines[i]} {lines[(i + 1) % len(lines)]}" for i in range(0, len(lines), step)][
        :count
    ]
    emb = model.embed_chunks(sample, batch_size=64)
    return emb.norm(dim=1).cpu().numpy()


def synthetic_index(model: Any, size: int, seed: int, lines: list[str]) -> Any:
    """A CPU float32 :class:`~qrag_integrations.core.index.ChunkIndex` of ``size`` chunks: real
    texts (:func:`make_texts`) with random embeddings at ``model``'s real norms."""
    from qrag_integrations.core.index import ChunkIndex

    with torch.inference_mode():
        norms = measure_real_norms(model, lines)
    index = ChunkIndex(model.embedding_dim)
    index.add(make_texts(size, lines), make_embeddings(size, model.embedding_dim, norms, seed))
    return index
