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

import dataclasses
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedTokenizerBase

from qrag_integrations.atomic import SaveKind, atomic_dir
from qrag_integrations.config import QRAGConfig
from qrag_integrations.encoder import MeanPoolEncoder
from qrag_integrations.errors import CheckpointError
from qrag_integrations.manifests import read_manifest_file, safetensors_shapes
from qrag_integrations.model import QRAGModel

FORMAT_NAME = "qrag-checkpoint"
FORMAT_VERSION = 1
CONFIG_FILE = "qrag_config.json"
TOKENIZER_DIR = "tokenizer"
ENCODER_DIRS = {"state_encoder": "state_encoder", "chunk_encoder": "chunk_encoder"}
PARTIAL_WEIGHTS_FILE = "trained_weights.safetensors"
CARD_FILE = "README.md"
REFERENCE_FILES = ("model_best.pt", "model_last.pt")
#: A checkpoint folder: what :func:`save_pretrained` may replace.
CHECKPOINT_SAVE = SaveKind(
    "Q-RAG checkpoint",
    frozenset({CONFIG_FILE, CARD_FILE, TOKENIZER_DIR, PARTIAL_WEIGHTS_FILE, *ENCODER_DIRS.values()}),
    CONFIG_FILE,
    FORMAT_NAME,
)


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape a checkpoint."""
    import safetensors
    import transformers

    from qrag_integrations._version import __version__

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
        digest.update(tensors[name].detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def base_fingerprint(model: QRAGModel) -> str:
    """Fingerprint of the frozen (not saved) part of a partial checkpoint's state encoder."""
    trained = set(model.trained_state_dict())
    frozen = {
        k: v for k, v in model.state_dict().items()
        if k.startswith("state_encoder.") and k not in trained
    }
    return tensor_fingerprint(frozen)


def chunk_encoder_fingerprint(model: QRAGModel) -> str:
    """Fingerprint of the chunk encoder: chunk embeddings saved in an index depend on exactly it."""
    return tensor_fingerprint(model.chunk_encoder.state_dict())


def save_pretrained(
    model: QRAGModel,
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
    path = Path(path)
    with atomic_dir(path, CHECKPOINT_SAVE, overwrite=overwrite) as tmp:
        write_checkpoint_files(model, tmp, card_notes, weights_dtype)
    return path


def write_checkpoint_files(
    model: QRAGModel, folder: Path, card_notes: str = "", weights_dtype: torch.dtype | None = None
) -> None:
    """Write the files of a checkpoint into ``folder``, an empty scratch folder of the caller's
    :func:`~qrag_integrations.atomic.atomic_dir` (see :func:`save_pretrained` for the arguments)."""
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
        weights = {k: v.detach().to("cpu", weights_dtype).contiguous() for k, v in model.trained_state_dict().items()}
        save_file(weights, str(folder / PARTIAL_WEIGHTS_FILE), metadata={"format": FORMAT_NAME})
        manifest["base_fingerprint"] = base_fingerprint(model)
    else:
        for attr, sub in ENCODER_DIRS.items():
            encoder: MeanPoolEncoder = getattr(model, attr)
            encoder.model.save_pretrained(folder / sub, safe_serialization=True)
    (folder / CONFIG_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (folder / CARD_FILE).write_text(model_card(manifest, card_notes), encoding="utf-8")


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
        "Load it with `QRAGRetriever.from_texts(texts, checkpoint=\"<this folder>\")` or",
        "`qrag_integrations.load_model(\"<this folder>\")`.",
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
    return read_manifest_file(path, CONFIG_FILE, FORMAT_NAME, FORMAT_VERSION, "Q-RAG checkpoint", CheckpointError)


def _load_encoder_dir(folder: Path, config: QRAGConfig) -> MeanPoolEncoder:
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        raise CheckpointError(f"checkpoint encoder folder {folder} lacks config.json or model.safetensors")
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
        detail = (f"{differ[0]} is {wanted[differ[0]]} there, {stored[differ[0]]} in the file" if differ
                  else f"{wanted_size} parameters there, {stored_size} in the file")
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
        k: v for k, v in tok_config.items()
        if k.endswith(("_file", "_files")) and v is not None and not _is_plain_file_name(v)
    }
    if outside:
        raise CheckpointError(f"{config_file} names files outside {folder}: {outside}")
    try:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as exc:
        raise CheckpointError(f"cannot load tokenizer from {folder}: {exc}") from exc


def load_checkpoint_dir(
    path: str | os.PathLike[str], device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> QRAGModel:
    """Load a checkpoint folder written by :func:`save_pretrained`."""
    path = Path(path)
    manifest = read_manifest(path)
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
                raise CheckpointError(f"{file}: {key} has shape {shape}, "
                                      f"expected {tuple(expected[key].shape)}")
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
        raise CheckpointError(f"{path / CONFIG_FILE}: unknown weights kind {manifest.get('weights')!r}")
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
            default model (see :func:`qrag_integrations.defaults.default_checkpoint`).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        dtype: encoder dtype (``torch.float16`` or ``torch.bfloat16`` on GPU halves memory).
        config: settings for an untrained model built from an encoder (ignored for checkpoints).

    Raises:
        CheckpointError: missing, corrupt or mismatching files, with the problem named.
    """
    from qrag_integrations.defaults import default_checkpoint, resolve_packaged_checkpoint

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

