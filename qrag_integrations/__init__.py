"""Q-RAG multi-step retrieval for LangChain and LlamaIndex.

The core (config, model, checkpoint, index, search) imports no framework; ``QRAGRetriever``, the
LangChain / LlamaIndex face, is imported on first access.
"""

import warnings
from typing import TYPE_CHECKING, Any

from qrag_integrations._version import __version__
from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.config import PositionMode, QRAGConfig, StateOrder
from qrag_integrations.core.errors import CheckpointError, IndexMismatchError, QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.reference_import import import_reference_checkpoint
from qrag_integrations.core.search import Hit, MultiStepSearcher, SearchSettings

if TYPE_CHECKING:
    from qrag_integrations.frameworks.retriever import QRAGRetriever

__all__ = [
    "CheckpointError",
    "ChunkIndex",
    "Hit",
    "IndexMismatchError",
    "MultiStepSearcher",
    "PositionMode",
    "QRAGConfig",
    "QRAGError",
    "QRAGModel",
    "QRAGRetriever",
    "SearchPolicy",
    "SearchSettings",
    "StateOrder",
    "__version__",
    "import_reference_checkpoint",
    "load_model",
    "save_pretrained",
]


def __getattr__(name: str) -> Any:
    if name in (
        "QRAGRetriever",
        "QRAGStoreRetriever",
    ):  # imports LangChain and LlamaIndex: only when asked for
        from qrag_integrations.frameworks.retriever import QRAGRetriever

        if name == "QRAGStoreRetriever":
            warnings.warn(
                "QRAGStoreRetriever is QRAGRetriever now: use QRAGRetriever.from_store(...) / .from_qdrant(...)",
                DeprecationWarning,
                stacklevel=2,
            )
        return QRAGRetriever
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
