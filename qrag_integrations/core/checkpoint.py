"""Checkpoint folders: ``save_pretrained`` / ``load_model``, no pickle anywhere on load.

Layout of a checkpoint folder::

    qrag_config.json          format + version, QRAGConfig, weights kind, library versions
    README.md                 generated model card
    tokenizer/                HF tokenizer files
    state_encoder/, chunk_encoder/     (weights == "full") HF config.json + model.safetensors
    trained_weights.safetensors        (weights == "partial") only the trained top layers; the
                                       rest comes from ``config.base_model``, checked by hash

A folder is data, never code: nothing is unpickled, no custom model or tokenizer code is run
(``trust_remote_code=False``), the tokenizer reads only files inside ``tokenizer/``, and the
encoder configs are checked against the weights' headers before a model is allocated.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors.torch import save_file
from transformers import PreTrainedTokenizerBase

from qrag_integrations._version import __version__
from qrag_integrations.core import validation
from qrag_integrations.core.atomic import SaveKind, atomic_dir
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.digests import files_under, seal
from qrag_integrations.core.encoder import MeanPoolEncoder
from qrag_integrations.core.errors import CheckpointError, DamagedCheckpointError
from qrag_integrations.core.manifests import read_manifest_file

FORMAT_NAME = "qrag-checkpoint"
FORMAT_VERSION = 1
CONFIG_FILE = "qrag_config.json"
TOKENIZER_DIR = "tokenizer"
ENCODER_DIRS = {"state_encoder": "state_encoder", "chunk_encoder": "chunk_encoder"}
PARTIAL_WEIGHTS_FILE = "trained_weights.safetensors"
CARD_FILE = "README.md"
REFERENCE_FILES = ("model_best.pt", "model_last.pt")
#: What to do about a damaged checkpoint, for error messages.
CHECKPOINT_FIX = "download or export the checkpoint again"


class SavableModel(Protocol):
    """What a checkpoint reads of a :class:`~qrag_integrations.core.model.QRAGModel` (a protocol,
    so that the model, which saves through this module, is not imported back)."""

    @property
    def config(self) -> QRAGConfig: ...
    @property
    def embedding_dim(self) -> int: ...
    @property
    def tokenizer(self) -> PreTrainedTokenizerBase: ...
    @property
    def state_encoder(self) -> MeanPoolEncoder: ...
    @property
    def chunk_encoder(self) -> MeanPoolEncoder: ...
    def trained_state_dict(self) -> dict[str, torch.Tensor]: ...
    def state_dict(self) -> dict[str, Any]: ...


#: A checkpoint folder: what :func:`save_pretrained` may replace.
CHECKPOINT_SAVE = SaveKind(
    "Q-RAG checkpoint",
    frozenset(
        {CONFIG_FILE, CARD_FILE, TOKENIZER_DIR, PARTIAL_WEIGHTS_FILE, *ENCODER_DIRS.values()}
    ),
    CONFIG_FILE,
    FORMAT_NAME,
)


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape a checkpoint."""
    import safetensors
    import transformers

    return {
        "qrag_integrations": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
    }


def tensor_fingerprint(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over names and fp32 bytes of tensors (stable across devices and dtypes)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(
            tensors[name].detach().to("cpu", torch.float32).contiguous().numpy().tobytes()
        )
    return digest.hexdigest()


def base_fingerprint(model: SavableModel) -> str:
    """Fingerprint of the frozen (not saved) part of a partial checkpoint's state encoder."""
    trained = set(model.trained_state_dict())
    frozen = {
        k: v
        for k, v in model.state_dict().items()
        if k.startswith("state_encoder.") and k not in trained
    }
    return tensor_fingerprint(frozen)


def chunk_encoder_fingerprint(model: SavableModel) -> str:
    """Fingerprint of the chunk encoder: chunk embeddings saved in an index depend on exactly it."""
    return tensor_fingerprint(model.chunk_encoder.state_dict())


def save_pretrained(
    model: SavableModel,
    path: str | os.PathLike[str],
    card_notes: str = "",
    weights_dtype: torch.dtype | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``model`` as a checkpoint folder, atomically.

    Args:
        model: the model to save.
        path: destination folder: missing, empty, or an earlier checkpoint (replaced whole).
        card_notes: extra Markdown appended to the generated model card (e.g. evaluation results).
        weights_dtype: store the trained weights of a partial checkpoint in this dtype
            (``torch.float16`` or ``torch.bfloat16`` halves the file; loading casts back to the
            model's dtype).
        overwrite: move anything else at ``path`` (a file, a folder of other files) aside to a
            sibling ``<name>.old-<time>`` instead of refusing; nothing is deleted.

    Returns:
        The folder path.

    Raises:
        QRAGError: ``path`` is a file or a folder that is not a checkpoint (naming what is
            there), and ``overwrite`` is false.
    """
    validation.check_path(path)
    path = Path(path)
    with atomic_dir(path, CHECKPOINT_SAVE, overwrite=overwrite) as tmp:
        write_checkpoint_files(model, tmp, card_notes, weights_dtype)
    return path


def write_checkpoint_files(
    model: SavableModel,
    folder: Path,
    card_notes: str = "",
    weights_dtype: torch.dtype | None = None,
) -> None:
    """Write the files of a checkpoint into ``folder``, an empty scratch folder of the caller's
    :func:`~qrag_integrations.core.atomic.atomic_dir` (see :func:`save_pretrained` for the arguments)."""
    partial = model.config.trainable_layers is not None
    manifest: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "config": model.config.to_dict(),
        "weights": "partial" if partial else "full",
        "embedding_dim": model.embedding_dim,
        "library_versions": library_versions(),
        "chunk_encoder_fingerprint": chunk_encoder_fingerprint(model),
    }
    model.tokenizer.save_pretrained(folder / TOKENIZER_DIR)
    if partial:
        weights = {
            k: v.detach().to("cpu", weights_dtype).contiguous()
            for k, v in model.trained_state_dict().items()
        }
        save_file(weights, str(folder / PARTIAL_WEIGHTS_FILE), metadata={"format": FORMAT_NAME})
        manifest["base_fingerprint"] = base_fingerprint(model)
    else:
        for attr, sub in ENCODER_DIRS.items():
            encoder: MeanPoolEncoder = getattr(model, attr)
            encoder.model.save_pretrained(folder / sub, safe_serialization=True)
    (folder / CARD_FILE).write_text(model_card(manifest, card_notes), encoding="utf-8")
    # every file so far but the card, which loading never reads (and users edit, e.g. on a hub)
    manifest = seal(manifest, folder, files_under(folder, skip={CARD_FILE}))
    (folder / CONFIG_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def model_card(manifest: dict[str, Any], notes: str = "") -> str:
    """A Markdown model card generated from a checkpoint manifest."""
    cfg = manifest["config"]
    lines = [
        "---",
        "library_name: qrag-integrations",
        "tags: [retrieval, q-rag, reinforcement-learning, multi-hop]",
        "---",
        "# Q-RAG retriever checkpoint",
        "",
        "State and chunk encoders of a Q-RAG multi-step retriever (Sorokin et al., ICLR 2026).",
        'Load it with `QRAGRetriever.from_texts(texts, checkpoint="<this folder>")` or',
        '`qrag_integrations.load_model("<this folder>")`.',
        "",
        "| setting | value |",
        "|---|---|",
        f"| base encoder | `{cfg['base_model']}` |",
        f"| weights stored | {manifest['weights']} |",
        f"| embedding size | {manifest['embedding_dim']} |",
        f"| position mode | {cfg['position_mode']} |",
        f"| state / chunk tokens | {cfg['max_state_tokens']} / {cfg['max_chunk_tokens']} |",
        f"| trainable layers | {cfg['trainable_layers'] or 'all'} |",
        "",
        "Library versions: "
        + ", ".join(f"{k} {v}" for k, v in manifest["library_versions"].items()),
    ]
    if cfg.get("extra"):
        lines += ["", "## Provenance", "", "```json", json.dumps(cfg["extra"], indent=2), "```"]
    if notes:
        lines += ["", notes.strip()]
    return "\n".join(lines) + "\n"


def read_manifest(path: Path) -> dict[str, Any]:
    """Read and check ``qrag_config.json``."""
    return read_manifest_file(
        path,
        CONFIG_FILE,
        FORMAT_NAME,
        FORMAT_VERSION,
        "Q-RAG checkpoint",
        CheckpointError,
        fix=CHECKPOINT_FIX,
        damaged=DamagedCheckpointError,
    )
