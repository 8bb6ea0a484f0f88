"""FAISS pre-selection for very large indexes: the rows with the largest unrotated inner product
with a state, which the search then re-scores exactly at their positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from qrag_integrations.core.chunks import Snapshot
from qrag_integrations.core.scan import faiss_threads_for
from qrag_integrations.core.snapshot_cache import BuiltFor


class FaissPreselector:
    """A FAISS inner-product index over a snapshot's unrotated embeddings, built on first use
    and rebuilt when the snapshot's embeddings change (thread-safe)."""

    def __init__(self) -> None:
        self._slot = BuiltFor()

    def candidates(
        self, snap: Snapshot, state: torch.Tensor, want: int, factory: str
    ) -> np.ndarray:
        """Ranks of the ``want`` rows with the largest unrotated inner product (``-1`` = none),
        from an index made by the ``faiss.index_factory`` string ``factory``."""
        index = self._slot.get(snap.embeddings, lambda: _faiss_index(snap, factory))
        with faiss_threads_for(1):
            _, cand = index.search(state.detach().cpu().numpy()[None].astype(np.float32), want)
        return cand[0]


def _faiss_index(snap: Snapshot, factory: str) -> Any:
    import faiss

    vectors = snap.embeddings.detach().float().cpu().numpy()
    index = faiss.index_factory(vectors.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        index.train(vectors)
    index.add(vectors)
    return index
