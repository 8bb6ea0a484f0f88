"""The core and the trainer never import a framework; the retriever face is loaded on demand."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
FRAMEWORKS = ("langchain", "langchain_core", "llama_index")
def frameworks():
    return sorted({m.split(".")[0] for m in sys.modules} & set(FRAMEWORKS))
import qrag_integrations, qrag_integrations.core.model, qrag_integrations.core.checkpoint
import qrag_integrations.core.search, qrag_integrations.core.index, qrag_integrations.stores.search, qrag_integrations.stores.rows
import qrag_integrations.core.persistence, qrag_integrations.core.validation, qrag_integrations.ingest.cli
from qrag_integrations import QRAGModel, load_model, __version__
import qrag_training.train, qrag_training.evaluate
core = frameworks()
qdrant = "qdrant_client" in sys.modules
from qrag_integrations import QRAGRetriever
print(json.dumps({"core": core, "qdrant": qdrant, "retriever": frameworks(), "name": QRAGRetriever.__name__}))
"""


def test_core_and_trainer_import_no_framework_and_the_retriever_is_lazy() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert (
        seen["core"] == [] and not seen["qdrant"]
    )  # qrag-embed imports qdrant_client only for a Qdrant option
    assert {"langchain_core", "llama_index"} <= set(seen["retriever"])
    assert seen["name"] == "QRAGRetriever"


def test_public_names_are_pinned() -> None:
    """``__all__`` is the public API the README uses; changing it is a decision, not a side effect."""
    import qrag_integrations

    assert qrag_integrations.__all__ == [
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
    for name in qrag_integrations.__all__:
        assert getattr(qrag_integrations, name) is not None
