"""Loading a Q-RAG model: a checkpoint folder (format in :mod:`~qrag_integrations.core.checkpoint`),
a packaged checkpoint's name, or a bare HF encoder (untrained Q-RAG). Reads only files inside the
folder and checks every shape before allocating; no pickle."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedTokenizerBase

from qrag_integrations.core import validation
from qrag_integrations.core.checkpoint import (
    CHECKPOINT_FIX,
    CONFIG_FILE,
    ENCODER_DIRS,
    PARTIAL_WEIGHTS_FILE,
    REFERENCE_FILES,
    TOKENIZER_DIR,
    base_fingerprint,
    read_manifest,
)
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.defaults import default_checkpoint, resolve_packaged_checkpoint
from qrag_integrations.core.digests import verify_files
from qrag_integrations.core.encoder import MeanPoolEncoder
from qrag_integrations.core.errors import CheckpointError, DamagedCheckpointError
from qrag_integrations.core.manifests import safetensors_shapes
from qrag_integrations.core.model import QRAGModel


def _load_encoder_dir(folder: Path, config: QRAGConfig) -> MeanPoolEncoder:
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        raise CheckpointError(
            f"checkpoint encoder folder {folder} lacks config.json or model.safetensors"
        )
    _check_config_fits_weights(folder)
    try:
        model = AutoModel.from_pretrained(folder, use_safetensors=True, trust_remote_code=False)
    except Exception as exc:  # safetensors / config errors come in many types
        raise CheckpointError(f"cannot load encoder weights from {folder}: {exc}") from exc
    return MeanPoolEncoder(model, config.output_scale, config.normalize)


def _check_config_fits_weights(folder: Path) -> None:
    """Refuse an encoder whose ``config.json`` describes other tensors than its weights file
    holds, before the model is allocated (a config can ask for any size; the file's header is
    checked against the file's length by safetensors)."""
    stored = safetensors_shapes(folder / "model.safetensors", CheckpointError)
    try:
        hf_config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        with torch.device("meta"):  # shapes only, no memory
            skeleton = AutoModel.from_config(hf_config, trust_remote_code=False)
    except Exception as exc:  # unknown model types, bad fields: many exception types
        raise CheckpointError(f"bad encoder config {folder / 'config.json'}: {exc}") from exc
    wanted = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    differ = sorted(k for k in set(wanted) & set(stored) if wanted[k] != stored[k])
    # Tensors the file lacks would be freshly initialised; a config asking for many of them
    # (e.g. a huge layer count over a small file) is refused by size.
    wanted_size = sum(math.prod(s) for s in wanted.values())
    stored_size = sum(math.prod(s) for s in stored.values())
    if differ or wanted_size > 2 * stored_size:
        detail = (
            f"{differ[0]} is {wanted[differ[0]]} there, {stored[differ[0]]} in the file"
            if differ
            else f"{wanted_size} parameters there, {stored_size} in the file"
        )
        raise CheckpointError(
            f"{folder / 'config.json'} does not describe the weights in {folder / 'model.safetensors'} ({detail})"
        )


def _is_plain_file_name(value: Any) -> bool:
    return isinstance(value, str) and value not in ("", ".", "..") and Path(value).name == value


def _load_tokenizer(folder: Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved in a checkpoint, read only from files inside ``folder``."""
    config_file = folder / "tokenizer_config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{config_file} is missing")
    try:
        tok_config = json.loads(config_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"corrupt {config_file}: {exc}") from exc
    if not isinstance(tok_config, dict):
        raise CheckpointError(f"corrupt {config_file}: not a JSON object")
    outside = {
        k: v
        for k, v in tok_config.items()
        if k.endswith(("_file", "_files")) and v is not None and not _is_plain_file_name(v)
    }
    if outside:
        raise CheckpointError(f"{config_file} names files outside {folder}: {outside}")
    try:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as exc:
        raise CheckpointError(f"cannot load tokenizer from {folder}: {exc}") from exc


def load_checkpoint_dir(
    path: str | os.PathLike[str],
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> QRAGModel:
    """Load a checkpoint folder written by :func:`save_pretrained`."""
    path = Path(path)
    manifest = read_manifest(path)
    verify_files(path, manifest, CONFIG_FILE, CHECKPOINT_FIX, DamagedCheckpointError)
    try:
        config = QRAGConfig.from_dict(manifest["config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"bad config in {path / CONFIG_FILE}: {exc}") from exc
    if manifest.get("weights") == "partial":
        model = QRAGModel.from_base(config)
        file = path / PARTIAL_WEIGHTS_FILE
        stored = safetensors_shapes(file, CheckpointError)  # checked before the tensors are read
        expected = model.trained_state_dict()
        if set(stored) != set(expected):
            raise CheckpointError(
                f"{file} does not hold the top {config.trainable_layers} layers of "
                f"{config.base_model!r} (missing {sorted(set(expected) - set(stored))[:3]}, "
                f"unexpected {sorted(set(stored) - set(expected))[:3]})"
            )
        for key, shape in stored.items():
            if shape != tuple(expected[key].shape):
                raise CheckpointError(
                    f"{file}: {key} has shape {shape}, expected {tuple(expected[key].shape)}"
                )
        try:
            weights = load_file(str(file))
        except Exception as exc:
            raise CheckpointError(f"corrupt {file}: {exc}") from exc
        if manifest.get("base_fingerprint") != base_fingerprint(model):
            raise CheckpointError(
                f"the installed base encoder {config.base_model!r} differs from the one this "
                f"partial checkpoint was trained on (weights hash mismatch)"
            )
        model.load_state_dict(weights, strict=False)
    elif manifest.get("weights") == "full":
        state = _load_encoder_dir(path / ENCODER_DIRS["state_encoder"], config)
        chunk = _load_encoder_dir(path / ENCODER_DIRS["chunk_encoder"], config)
        tokenizer = _load_tokenizer(path / TOKENIZER_DIR)
        model = QRAGModel(config, state, chunk, tokenizer)
    else:
        raise CheckpointError(
            f"{path / CONFIG_FILE}: unknown weights kind {manifest.get('weights')!r}"
        )
    if model.embedding_dim != manifest.get("embedding_dim"):
        raise CheckpointError(
            f"{path}: encoders give embeddings of size {model.embedding_dim}, "
            f"manifest says {manifest.get('embedding_dim')}"
        )
    return model.to(device=device, dtype=dtype).eval()


def load_model(
    checkpoint: str | os.PathLike[str] | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    config: QRAGConfig | None = None,
) -> QRAGModel:
    """Load a Q-RAG model from a checkpoint folder, or build an untrained one from an encoder.

    Args:
        checkpoint: a folder from :func:`save_pretrained`, a shipped checkpoint's name
            (``"packaged:qrag-hotpotqa-minilm"``, ``"packaged:qrag-babi-demo"``); or any HF encoder name / local folder
            (untrained Q-RAG: behaves like an iterative dense retriever); ``None`` for the
            default model (see :func:`qrag_integrations.core.defaults.default_checkpoint`).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        dtype: encoder dtype (``torch.float16`` or ``torch.bfloat16`` on GPU halves memory).
        config: settings for an untrained model built from an encoder (ignored for checkpoints).

    Raises:
        CheckpointError: missing, corrupt or mismatching files, with the problem named.
    """
    validation.check_device(device)
    if checkpoint is not None:
        validation.check_path(checkpoint, "checkpoint")
    if checkpoint is None:
        checkpoint = default_checkpoint()
    checkpoint = resolve_packaged_checkpoint(checkpoint)
    path = Path(checkpoint)
    if path.is_dir() and (path / CONFIG_FILE).exists():
        return load_checkpoint_dir(path, device, dtype)
    if path.is_dir() and any((path / f).exists() for f in REFERENCE_FILES):
        raise CheckpointError(
            f"{path} holds a checkpoint of the reference Q-RAG code; convert it once with "
            "qrag_integrations.import_reference_checkpoint(path).save_pretrained(new_folder)"
        )
    if path.is_dir() and (
        (path / PARTIAL_WEIGHTS_FILE).exists() or (path / ENCODER_DIRS["state_encoder"]).is_dir()
    ):
        raise CheckpointError(f"{path} looks like a Q-RAG checkpoint but {CONFIG_FILE} is missing")
    if path.is_dir() and not (path / "config.json").exists():
        raise CheckpointError(
            f"{path} is neither a Q-RAG checkpoint ({CONFIG_FILE} missing) nor an HF encoder "
            "folder (config.json missing)"
        )
    if path.is_file():
        raise CheckpointError(f"{path} is a file; a checkpoint is a folder with {CONFIG_FILE}")
    if str(checkpoint).startswith((".", "/", "~")) and not path.exists():
        raise CheckpointError(f"checkpoint folder {path} does not exist")
    base_config = dataclasses.replace(config or QRAGConfig(), base_model=str(checkpoint))
    return QRAGModel.from_base(base_config, device=device, dtype=dtype).eval()
