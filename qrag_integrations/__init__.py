"""Q-RAG multi-step retrieval for LangChain and LlamaIndex."""

__version__ = "0.1.0"

from qrag_integrations.checkpoint import load_model, save_pretrained
from qrag_integrations.config import PositionMode, QRAGConfig, StateOrder
from qrag_integrations.errors import CheckpointError, IndexMismatchError, QRAGError
from qrag_integrations.index import ChunkIndex
from qrag_integrations.model import QRAGModel
from qrag_integrations.reference_import import import_reference_checkpoint
from qrag_integrations.retriever import QRAGRetriever
from qrag_integrations.search import Hit, MultiStepSearcher, SearchSettings

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
    "SearchSettings",
    "StateOrder",
    "__version__",
    "import_reference_checkpoint",
    "load_model",
    "save_pretrained",
]
