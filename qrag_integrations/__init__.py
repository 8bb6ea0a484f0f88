"""Q-RAG multi-step retrieval for LangChain and LlamaIndex."""

__version__ = "0.1.0"

from qrag_integrations.checkpoint import load_model, save_pretrained
from qrag_integrations.config import PositionMode, QRAGConfig, StateOrder
from qrag_integrations.errors import CheckpointError, IndexMismatchError, QRAGError
from qrag_integrations.model import QRAGModel
from qrag_integrations.reference_import import import_reference_checkpoint

__all__ = [
    "CheckpointError",
    "IndexMismatchError",
    "PositionMode",
    "QRAGConfig",
    "QRAGError",
    "QRAGModel",
    "StateOrder",
    "__version__",
    "import_reference_checkpoint",
    "load_model",
    "save_pretrained",
]
