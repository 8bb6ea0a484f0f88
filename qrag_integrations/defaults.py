"""Which model is used when none is given."""

from __future__ import annotations

from pathlib import Path

from qrag_integrations.config import PACKAGED_MINILM

#: Folder of the demo checkpoint shipped inside the package (trained by ``qrag-train preset=cpu``
#: on BabiLong-style qa2; see its model card).
DEMO_CHECKPOINT = Path(__file__).parent / "assets" / "demo_checkpoint"


def default_checkpoint() -> str:
    """Model of a retriever built without ``checkpoint=``: the packaged all-MiniLM-L6-v2, untrained
    for Q-RAG (it then behaves like an iterative dense retriever)."""
    return PACKAGED_MINILM


def demo_checkpoint() -> str:
    """Model of ``qrag-demo``: the shipped demo checkpoint if present, else the default model."""
    if (DEMO_CHECKPOINT / "qrag_config.json").is_file():
        return str(DEMO_CHECKPOINT)
    return default_checkpoint()
