"""What the long-context benchmarks share: split seeds, the noise pool size, and a retriever of the
comparison (:class:`Method`, over the trainer's baselines and the core search)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from qrag_training.baselines import bm25_retrieve, dense_retrieve, greedy_retrieve
from qrag_training.data.episode import Episode
from qrag_training.metrics import Retrieval

from benchmarks.harness.embedding_cache import PoolEmbedder
from qrag_integrations.core.model import QRAGModel

SPLIT_SEEDS = {"test": 424242, "val": 555555}


#: Largest noise pool (sentences): 1M tokens. Longer haystacks repeat it.
POOL_MAX = 40_000


#: Chunks whose episodes are searched together (bounds memory at 1M+ tokens).
BATCH_CHUNKS = 20_000


@dataclasses.dataclass
class Method:
    """One retriever of the comparison."""

    name: str
    kind: str
    """``"multi-step"``, ``"dense"`` or ``"bm25"``."""
    model: QRAGModel | None = None
    embed: PoolEmbedder | None = None
    stop: bool = False
    """Also report what ``stop_threshold`` returns (trained checkpoints)."""

    def retrieve(self, episodes: Sequence[Episode], k: int) -> list[Retrieval]:
        if self.kind == "bm25":
            return bm25_retrieve(episodes, k)
        if self.kind == "dense":
            return dense_retrieve(self.model, episodes, k, embed=self.embed)
        batch = max(1, min(16, BATCH_CHUNKS // max(len(e.chunks) for e in episodes)))
        return greedy_retrieve(self.model, episodes, k, batch_size=batch, embed=self.embed)
