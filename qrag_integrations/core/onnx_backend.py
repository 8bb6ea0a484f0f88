"""ONNX Runtime inference for the two encoders (``backend="onnx"``, optional ``quantize="int8"``).

An encoder (:class:`~qrag_integrations.core.encoder.MeanPoolEncoder`: transformer, mean pooling,
normalisation or scale) is exported once with PyTorch's own exporter (``torch.onnx.export``) and,
for ``int8``, quantized with ONNX Runtime's dynamic quantization (``MatMul`` weights, per output
channel: the setting that kept embeddings closest to fp32 in our probe). The export is cached like
the reader's converted models (:mod:`qrag_integrations.core.cache_dirs`): a folder per key (the
SHA-256 of the encoder's weights and pooling settings, the quantization, and the torch / onnx /
onnxruntime versions), written atomically with a manifest listing each file's SHA-256, checked on
every load, rebuilt when it does not check out. Nothing is unpickled.

Only inference uses it: :class:`~qrag_integrations.core.model.QRAGModel` encodes with torch
whenever gradients are on (training), so the backend never changes what is trained or saved.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qrag_integrations.core.atomic import SaveKind, atomic_dir
from qrag_integrations.core.cache_dirs import cache_folder, file_sha256
from qrag_integrations.core.encoder import MeanPoolEncoder
from qrag_integrations.core.errors import QRAGError, optional_import
from qrag_integrations.core.threads import PerThreadCount

logger = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "openvino")
QUANTIZE = (None, "int8")
#: The ``quantize`` values each backend offers (``bf16``: torch autocast, core/precision.py;
#: OpenVINO's bf16 inference precision, core/openvino_backend.py).
QUANTIZE_OF = {"torch": (None, "bf16"), "onnx": QUANTIZE, "openvino": (None, "bf16")}
ONNX_FILE, MANIFEST_FILE = "encoder.onnx", "qrag-onnx.json"
ENTRY_FORMAT, ENTRY_VERSION = "qrag-onnx-encoder", 1
ENTRY = SaveKind(
    "exported encoder cache", frozenset({ONNX_FILE, MANIFEST_FILE}), MANIFEST_FILE, ENTRY_FORMAT
)
#: ONNX opset of the export.
OPSET = 17


def _onnxruntime() -> Any:
    return optional_import("onnxruntime", "backend='onnx'", "onnx")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def encoder_key(encoder: MeanPoolEncoder, quantize: str | None) -> dict[str, Any]:
    """What an export depends on: the weights, the pooling settings, quantization, libraries."""
    digest = hashlib.sha256()
    for name, tensor in sorted(encoder.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu").contiguous().numpy().tobytes())
    return {
        "weights_sha256": digest.hexdigest(),
        "normalize": bool(encoder.normalize),
        "output_scale": float(encoder.output_scale),
        "quantize": quantize,
        "versions": {p: _version(p) for p in ("torch", "onnx", "onnxruntime")},
    }


def _entry_name(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def _entry_problem(entry: Path, key: dict[str, Any]) -> str | None:
    """``None`` when ``entry`` holds an intact export of ``key``; else what is wrong."""
    try:
        manifest = json.loads((entry / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no readable manifest"
    if manifest.get("format") != ENTRY_FORMAT or manifest.get("version") != ENTRY_VERSION:
        return "another format or layout version"
    if manifest.get("key") != key:
        return "an export of something else"
    model = entry / ONNX_FILE
    if not model.is_file() or file_sha256(model) != manifest.get("sha256"):
        return f"{ONNX_FILE} is missing or does not match its SHA-256"
    return None


def _export(encoder: MeanPoolEncoder, folder: Path, quantize: str | None) -> None:
    """Write ``encoder.onnx`` (fp32, or int8-quantized) into ``folder``."""
    vocab = int(getattr(encoder.model.config, "vocab_size", 100))
    ids = torch.randint(0, vocab, (2, 16))
    mask = torch.ones_like(ids)
    was_training = encoder.training
    encoder.eval()
    target = folder / (ONNX_FILE if quantize is None else "fp32.onnx")
    try:
        with warnings.catch_warnings():
            # the tracer's notes on Python-level shape arithmetic: the axes are declared dynamic
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            torch.onnx.export(
                encoder,
                (ids, mask),
                str(target),
                input_names=["input_ids", "attention_mask"],
                output_names=["embeddings"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "embeddings": {0: "batch"},
                },
                opset_version=OPSET,
                dynamo=False,  # the TorchScript exporter: no onnxscript, dynamic axes as named
            )
    finally:
        encoder.train(was_training)
    if quantize == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # its advice to pre-process models for static quantization
        try:
            quantize_dynamic(
                str(target),
                str(folder / ONNX_FILE),
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
            )
        finally:
            root.setLevel(level)
        target.unlink()


class OnnxEncoder:
    """An exported encoder run by ONNX Runtime: ``(input_ids, attention_mask) -> (B, D)``.

    A session's intra-op thread count is fixed when it is made, so there is one session per
    count, made on first use: in a search, the search's count
    (:func:`~qrag_integrations.core.threads.threads_in_search`: one thread for a lone question
    by default); elsewhere (embedding chunks) ``threads``, else torch's count at the call (its
    session made with the encoder). Each session holds its own copy of the weights.
    """

    def __init__(self, path: Path, threads: int | None = None) -> None:
        _onnxruntime()
        self.path = path
        self.sessions = PerThreadCount(self._session, threads)
        """The sessions, by intra-op thread count (``threads``: the count outside a search)."""

    def _session(self, threads: int) -> Any:
        options = _onnxruntime().SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        return _onnxruntime().InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        feeds = {
            "input_ids": input_ids.to("cpu").numpy().astype(np.int64),
            "attention_mask": attention_mask.to("cpu").numpy().astype(np.int64),
        }
        return torch.from_numpy(self.sessions.for_call().run(None, feeds)[0])


def onnx_export(
    encoder: MeanPoolEncoder,
    quantize: str | None = None,
    cache_dir: str | os.PathLike[str] | bool | None = None,
) -> Path:
    """The ``encoder.onnx`` file of ``encoder``: from the cache when an intact export is there,
    else exported now (and cached unless caching is off). Needs the ``onnx`` package, not
    onnxruntime (OpenVINO reads the same file: :mod:`qrag_integrations.core.openvino_backend`).

    Args:
        encoder: the torch encoder (its current weights are exported).
        quantize: ``None`` (fp32) or ``"int8"`` (dynamic quantization of ``MatMul`` weights,
            which needs onnxruntime's quantizer).
        cache_dir: where exports are kept (see :func:`~qrag_integrations.core.cache_dirs.cache_folder`;
            ``False``: a temporary folder, exported on every call).

    Raises:
        QRAGError: an unknown ``quantize``, a missing library, or a cache entry that is not ours.
    """
    if quantize not in QUANTIZE:
        raise QRAGError(f"quantize must be None or 'int8', got {quantize!r}")
    optional_import("onnx", "exporting an encoder", "onnx")  # torch.onnx.export writes through it
    if quantize is not None:
        _onnxruntime()
    key = encoder_key(encoder, quantize)
    root = cache_folder("onnx", cache_dir)
    if root is None:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="qrag-onnx-"))
        _export(encoder, folder, quantize)
        return folder / ONNX_FILE
    entry = root / _entry_name(key)
    if entry.exists():
        obstacle = ENTRY.obstacle(entry)
        if obstacle is not None:
            raise QRAGError(
                f"refusing the encoder cache folder {entry}: it is {obstacle}; remove it or choose "
                "another cache (QRAG_CACHE_DIR)"
            )
        problem = _entry_problem(entry, key)
        if problem is None:
            return entry / ONNX_FILE
        logger.warning("re-exporting the encoder cache entry %s: %s", entry, problem)
    root.mkdir(parents=True, exist_ok=True)
    with atomic_dir(entry, ENTRY) as tmp:
        _export(encoder, tmp, quantize)
        manifest = {
            "format": ENTRY_FORMAT,
            "version": ENTRY_VERSION,
            "key": key,
            "sha256": file_sha256(tmp / ONNX_FILE),
        }
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return entry / ONNX_FILE


def onnx_encoder(
    encoder: MeanPoolEncoder,
    quantize: str | None = None,
    cache_dir: str | os.PathLike[str] | bool | None = None,
) -> OnnxEncoder:
    """The ONNX Runtime form of ``encoder`` (the export of :func:`onnx_export`).

    Raises:
        QRAGError: an unknown ``quantize``, onnxruntime missing, or a cache entry that is not ours.
    """
    if quantize not in QUANTIZE:
        raise QRAGError(f"quantize must be None or 'int8', got {quantize!r}")
    _onnxruntime()
    return OnnxEncoder(onnx_export(encoder, quantize, cache_dir))
