"""Which model a retriever uses when no checkpoint is given."""

from __future__ import annotations

from pathlib import Path

from qrag_integrations.config import PACKAGED_MINILM

#: Folder of the demo checkpoint shipped inside the package (trained by ``qrag-train``).
DEMO_CHECKPOINT = Path(__file__).parent / "assets" / "demo_checkpoint"


def default_checkpoint() -> str:
    """The shipped demo checkpoint if present, else the packaged MiniLM (untrained for Q-RAG)."""
    if (DEMO_CHECKPOINT / "qrag_config.json").is_file():
        return str(DEMO_CHECKPOINT)
    return PACKAGED_MINILM
