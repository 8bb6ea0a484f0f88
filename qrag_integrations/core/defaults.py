"""Which model is used when none is given."""

from __future__ import annotations

from pathlib import Path

from qrag_integrations.core.config import PACKAGED_MINILM, PACKAGED_PREFIX
from qrag_integrations.core.errors import CheckpointError
from qrag_integrations.core.validation import suggestion

#: The package's shipped files (``qrag_integrations/assets``).
ASSETS = Path(__file__).resolve().parents[1] / "assets"
#: Folder of the demo checkpoint shipped inside the package (``preset=babi_gpu``: MiniLM, top 2
#: layers trained on BabiLong-style qa1-qa5 at 2K-8K tokens with the next-hop warm start; see its
#: model card; ``python -m qrag_training.export`` exports such a run).
DEMO_CHECKPOINT = ASSETS / "demo_checkpoint"

#: Folder of the HotpotQA checkpoint shipped inside the package (``preset=hotpotqa_gpu``: next-hop
#: warm start of MiniLM's top 2 layers; see its model card).
HOTPOTQA_CHECKPOINT = ASSETS / "hotpotqa_checkpoint"

#: Folder of the general checkpoint shipped inside the package (``preset=general_gpu``, the last of
#: four next-hop stages from the untrained MiniLM's top 2 layers on HotpotQA, BabiLong and RULER
#: together; see its model card; ``python -m qrag_training.export`` exports such a run, with the
#: benchmark sections of ``benchmarks/general/card.py`` as its ``--notes``).
GENERAL_CHECKPOINT = ASSETS / "general_checkpoint"

#: Name of the model a retriever uses without ``checkpoint=``.
DEFAULT_CHECKPOINT = f"{PACKAGED_PREFIX}qrag-general-minilm"

#: Names that ``checkpoint=`` accepts for the checkpoints shipped in the package.
PACKAGED_CHECKPOINTS: dict[str, Path] = {
    DEFAULT_CHECKPOINT: GENERAL_CHECKPOINT,
    f"{PACKAGED_PREFIX}qrag-hotpotqa-minilm": HOTPOTQA_CHECKPOINT,
    f"{PACKAGED_PREFIX}qrag-babi-demo": DEMO_CHECKPOINT,
}


def check_packaged_name(name: str) -> None:
    """Refuse a ``packaged:`` name that no installed package ships (a local folder of that name
    is left alone).

    Raises:
        CheckpointError: naming it, the closest packaged name and every packaged one.
    """
    known = [PACKAGED_MINILM, *PACKAGED_CHECKPOINTS]
    if not name.startswith(PACKAGED_PREFIX) or name in known or Path(name).exists():
        return
    close = suggestion(name, known)
    hint = f" (did you mean {close!r}?)" if close else ""
    raise CheckpointError(
        f"unknown packaged checkpoint {name!r}{hint}; the packaged ones are {PACKAGED_MINILM} (the "
        f"encoder, not trained for Q-RAG), {', '.join(sorted(PACKAGED_CHECKPOINTS))} (the default: "
        f"{DEFAULT_CHECKPOINT})"
    )


def resolve_packaged_checkpoint(checkpoint: str | Path) -> str | Path:
    """The folder of a shipped checkpoint named in :data:`PACKAGED_CHECKPOINTS`; anything else
    unchanged.

    Raises:
        CheckpointError: an unknown ``packaged:`` name (see :func:`check_packaged_name`).
    """
    check_packaged_name(str(checkpoint))
    return PACKAGED_CHECKPOINTS.get(str(checkpoint), checkpoint)


def default_checkpoint() -> str:
    """Model of a retriever built without ``checkpoint=``: the packaged general checkpoint
    (MiniLM, top 2 layers trained on HotpotQA, BabiLong and RULER together), chosen on validation
    because no cell had single-step dense top-k better beyond the paired interval (SQuAD
    out of domain, HotpotQA, bAbI in seen and unseen noise at 4K-128K tokens, RULER;
    ``benchmarks/general``). The untrained MiniLM stays one argument away:
    ``checkpoint="packaged:all-MiniLM-L6-v2"``."""
    return DEFAULT_CHECKPOINT
