"""Which model is used when none is given."""

from __future__ import annotations

from pathlib import Path

from qrag_integrations.config import PACKAGED_MINILM

#: Folder of the demo checkpoint shipped inside the package (MiniLM, top 2 layers trained on
#: BabiLong-style qa1-qa5 at ~4K tokens with the next-hop warm start; see its model card and
#: ``benchmarks/export_babi_checkpoint.py``).
DEMO_CHECKPOINT = Path(__file__).parent / "assets" / "demo_checkpoint"

#: Folder of the HotpotQA checkpoint shipped inside the package (``preset=hotpotqa_gpu``: next-hop
#: warm start of MiniLM's top 2 layers; see its model card).
HOTPOTQA_CHECKPOINT = Path(__file__).parent / "assets" / "hotpotqa_checkpoint"

#: Names that ``checkpoint=`` accepts for the checkpoints shipped in the package.
PACKAGED_CHECKPOINTS: dict[str, Path] = {
    "packaged:qrag-hotpotqa-minilm": HOTPOTQA_CHECKPOINT,
    "packaged:qrag-babi-demo": DEMO_CHECKPOINT,
}


def resolve_packaged_checkpoint(checkpoint: str | Path) -> str | Path:
    """The folder of a shipped checkpoint named in :data:`PACKAGED_CHECKPOINTS`; anything else
    unchanged."""
    return PACKAGED_CHECKPOINTS.get(str(checkpoint), checkpoint)


def default_checkpoint() -> str:
    """Model of a retriever built without ``checkpoint=``: the packaged all-MiniLM-L6-v2, untrained
    for Q-RAG, with settings under which it does not rank below single-step dense top-k
    (question anchoring; see ``QRAGConfig.question_weight``). The shipped HotpotQA checkpoint is
    not the default: far better on HotpotQA, it finds fewer facts than this model on bAbI-style
    single-fact questions (qa4 at k = 1: 0.81 vs 0.86 on validation seeds; benchmarks/README.md)."""
    return PACKAGED_MINILM


def demo_checkpoint() -> str:
    """Model of ``qrag-demo``: the shipped demo checkpoint if present, else the default model."""
    if (DEMO_CHECKPOINT / "qrag_config.json").is_file():
        return str(DEMO_CHECKPOINT)
    return default_checkpoint()
