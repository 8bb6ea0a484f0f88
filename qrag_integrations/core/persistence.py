"""Save and load a retriever folder: settings JSON, the chunk index and (for a model from a local
folder) the model, written atomically and read back without pickle.

Layout of a saved folder::

    retriever.json   {"format": "qrag-retriever", "format_version": 1, "settings": {...},
                      "model_in_folder": true|false}
    index/           a saved ChunkIndex (its manifest records the chunk encoder's fingerprint)
    model/           a checkpoint folder; absent when the model is a packaged or hub name

Framework-free: :class:`~qrag_integrations.frameworks.retriever.QRAGRetriever` passes its settings in and
rebuilds itself from what :func:`read_retriever` returns.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qrag_integrations.core import validation
from qrag_integrations.core.atomic import SaveKind, atomic_dir
from qrag_integrations.core.checkpoint import chunk_encoder_fingerprint, write_checkpoint_files
from qrag_integrations.core.digests import (
    DIGESTS_KEY,
    check_manifest,
    collect_undigested,
    seal,
    warn_undigested,
)
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel

SETTINGS_FILE, MODEL_DIR, INDEX_DIR = "retriever.json", "model", "index"
RETRIEVER_FORMAT = "qrag-retriever"
#: A saved retriever folder: what :func:`save_retriever` may replace.
RETRIEVER_SAVE = SaveKind(
    "saved QRAGRetriever",
    frozenset({SETTINGS_FILE, MODEL_DIR, INDEX_DIR}),
    SETTINGS_FILE,
    RETRIEVER_FORMAT,
)
#: What to do about a damaged saved retriever, for error messages.
RETRIEVER_FIX = "save the retriever again, or rebuild it from your texts"


def is_named_model(checkpoint: str | None) -> bool:
    """True for a packaged alias or hub name, False for a local folder (Q-RAG checkpoint or HF
    encoder), which is copied into a save so that the save is self-contained."""
    if checkpoint is None:
        return False
    return not Path(checkpoint).exists()


def save_retriever(
    path: str | os.PathLike[str],
    settings: dict[str, Any],
    model: QRAGModel,
    index: ChunkIndex,
    overwrite: bool = False,
) -> None:
    """Write a retriever folder atomically.

    Args:
        path: destination folder: missing, empty, or an earlier saved retriever (replaced whole).
        settings: the retriever's settings (JSON-serialisable); ``settings["checkpoint"]`` names
            the model, which is copied in unless it is a packaged or hub name.
        model: the retriever's model.
        index: its chunk index.
        overwrite: move anything else at ``path`` aside instead of refusing (nothing is deleted).

    Raises:
        QRAGError: ``path`` holds something else and ``overwrite`` is false, or a setting is not
            JSON-serialisable.
    """
    validation.check_path(path)
    embed_model = not is_named_model(settings.get("checkpoint"))
    fingerprint = chunk_encoder_fingerprint(model)
    try:
        saved = {
            "format": RETRIEVER_FORMAT,
            "format_version": 1,
            "settings": settings,
            "model_in_folder": embed_model,
        }
        # its own digest only: the model and index folders record theirs
        settings_json = json.dumps(seal(saved, Path(path), []), indent=2) + "\n"
    except (TypeError, ValueError) as exc:
        raise QRAGError(
            f"the retriever's settings must be JSON-serialisable to save it: {exc}"
        ) from exc
    with atomic_dir(path, RETRIEVER_SAVE, overwrite=overwrite) as tmp:
        if embed_model:
            (tmp / MODEL_DIR).mkdir()
            write_checkpoint_files(model, tmp / MODEL_DIR)
        index.save(tmp / INDEX_DIR, extra={"chunk_encoder_fingerprint": fingerprint})
        (tmp / SETTINGS_FILE).write_text(settings_json, encoding="utf-8")


@dataclass
class SavedRetriever:
    """What a retriever folder holds, loaded."""

    settings: dict[str, Any]
    """The saved settings (``device`` replaced when loading asked for another)."""
    model: QRAGModel
    """The model, from the folder or by its saved name."""
    index: ChunkIndex
    """The chunk index, checked against the model's chunk encoder."""


def read_retriever(path: str | os.PathLike[str], device: str | None = None) -> SavedRetriever:
    """Read a folder written by :func:`save_retriever` (no pickle).

    Args:
        path: the folder.
        device: load the model and index onto this device instead of the saved one.

    Raises:
        QRAGError: missing or corrupt files.
        IndexMismatchError: the index was built with another chunk encoder.
    """
    validation.check_path(path)
    path = Path(path)
    try:
        saved = json.loads((path / SETTINGS_FILE).read_text(encoding="utf-8"))
        if not isinstance(saved, dict) or saved.get("format") != RETRIEVER_FORMAT:
            raise TypeError(f"not a {RETRIEVER_FORMAT} file")
        settings = saved["settings"]
        if not isinstance(settings, dict):
            raise TypeError(f"settings must be an object, got {type(settings).__name__}")
        settings = dict(settings)
    except FileNotFoundError as exc:
        raise QRAGError(f"{path} is not a saved QRAGRetriever: {SETTINGS_FILE} is missing") from exc
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise QRAGError(f"corrupt {path / SETTINGS_FILE}: {exc}") from exc
    check_manifest(saved, path / SETTINGS_FILE, RETRIEVER_FIX)
    if device is not None:
        settings["device"] = device
    model_ref = (
        str(path / MODEL_DIR) if saved.get("model_in_folder") else settings.get("checkpoint")
    )
    # a save without digests (an older version) warns once, here, not once per folder in it
    with collect_undigested() as undigested:
        model = load_model(model_ref, device=settings.get("device", "cpu"))
        manifest = ChunkIndex.read_manifest(path / INDEX_DIR)
        if manifest.get("chunk_encoder_fingerprint") not in (
            None,
            chunk_encoder_fingerprint(model),
        ):
            raise IndexMismatchError(
                f"the index in {path / INDEX_DIR} was embedded by a different chunk encoder "
                f"than {model_ref!r}; rebuild it"
            )
        index = ChunkIndex.load(
            path / INDEX_DIR, expected_dim=model.embedding_dim, device=settings.get("device", "cpu")
        )
    parts = [SETTINGS_FILE] if DIGESTS_KEY not in saved else []
    parts += [str(p.relative_to(path)) if p.is_relative_to(path) else str(p) for p in undigested]
    if parts:
        warn_undigested(path, parts, "save it again to add them (QRAGRetriever.load, then .save)")
    return SavedRetriever(settings, model, index)
