"""OpenVINO inference for the two encoders (``backend="openvino"``, optional ``quantize="bf16"``).

OpenVINO reads the encoder's ONNX export (:func:`~qrag_integrations.core.onnx_backend.onnx_export`:
exported once per checkpoint, cached and checked on load as for ``backend="onnx"``) and compiles
it for the CPU. ``quantize=None`` asks for float32 inference (embeddings equal torch's to ~1e-6);
``"bf16"`` for bfloat16 inference, which OpenVINO runs with the CPU's AVX512-BF16 / AMX
instructions (where the CPU has none, a warning is logged and float32 is used). Only inference
uses it, as with the ONNX backend: training encodes with torch.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qrag_integrations.core.encoder import MeanPoolEncoder
from qrag_integrations.core.errors import QRAGError, optional_import
from qrag_integrations.core.onnx_backend import onnx_export
from qrag_integrations.core.threads import PerThreadCount

logger = logging.getLogger(__name__)

#: OpenVINO's ``INFERENCE_PRECISION_HINT`` of each ``quantize`` value.
PRECISION = {None: "f32", "bf16": "bf16"}


def _openvino() -> Any:
    return optional_import("openvino", "backend='openvino'", "openvino")


def _has_bf16(core: Any) -> bool:
    """Whether OpenVINO's CPU plugin reports bfloat16 instructions."""
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


class OpenVinoEncoder:
    """An exported encoder compiled by OpenVINO for the CPU: ``(input_ids, attention_mask) -> (B, D)``.

    ``INFERENCE_NUM_THREADS`` is fixed when a model is compiled, so there is one compiled model
    per thread count, made on first use, as for ONNX Runtime sessions
    (:class:`~qrag_integrations.core.onnx_backend.OnnxEncoder`).
    """

    def __init__(self, path: Path, quantize: str | None = None, threads: int | None = None) -> None:
        if quantize not in PRECISION:
            raise QRAGError(f"quantize must be None or 'bf16', got {quantize!r}")
        self._core = _openvino().Core()
        precision = PRECISION[quantize]
        if precision == "bf16" and not _has_bf16(self._core):
            logger.warning("this CPU has no bfloat16 instructions: OpenVINO runs in float32")
            precision = "f32"
        self.path = path
        self.precision = precision
        self.compiled = PerThreadCount(self._compile, threads)
        """The compiled models, by thread count (``threads``: the count outside a search)."""

    def _compile(self, threads: int) -> Any:
        return self._core.compile_model(
            str(self.path),
            "CPU",
            {
                "INFERENCE_NUM_THREADS": threads,
                "INFERENCE_PRECISION_HINT": self.precision,
                "PERFORMANCE_HINT": "LATENCY",
            },
        )

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        feeds = {
            "input_ids": input_ids.to("cpu").numpy().astype(np.int64),
            "attention_mask": attention_mask.to("cpu").numpy().astype(np.int64),
        }
        # a request per call: the compiled model's own request is not safe across threads
        out = self.compiled.for_call().create_infer_request().infer(feeds)
        return torch.from_numpy(np.array(out[0], dtype=np.float32, copy=True))


def openvino_encoder(
    encoder: MeanPoolEncoder,
    quantize: str | None = None,
    cache_dir: str | os.PathLike[str] | bool | None = None,
) -> OpenVinoEncoder:
    """The OpenVINO form of ``encoder``, compiled from its cached ONNX export.

    Args:
        encoder: the torch encoder (its current weights are exported).
        quantize: ``None`` (float32 inference) or ``"bf16"``.
        cache_dir: where ONNX exports are kept (as for ``backend="onnx"``).

    Raises:
        QRAGError: an unknown ``quantize``, openvino or onnx missing, or a cache entry that is
            not ours.
    """
    if quantize not in PRECISION:
        raise QRAGError(f"quantize must be None or 'bf16', got {quantize!r}")
    _openvino()
    return OpenVinoEncoder(onnx_export(encoder, None, cache_dir), quantize)
