"""``--backend`` / ``--quantize``: the inference backend of a command-line tool's encoders, the
options :meth:`QRAGModel.set_backend <qrag_integrations.core.model.QRAGModel.set_backend>` and
the retriever's ``backend`` / ``quantize`` fields take (``qrag-eval``, ``qrag-embed``)."""

from __future__ import annotations

import argparse
from typing import Any

from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.onnx_backend import BACKENDS, QUANTIZE_OF

#: Every ``--quantize`` value some backend offers (which backend offers which is checked by
#: ``set_backend``, with an error naming the pairs).
QUANTIZE_CHOICES = tuple(sorted({q for qs in QUANTIZE_OF.values() for q in qs if q is not None}))


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--backend`` and ``--quantize`` to ``parser``."""
    offers = "; ".join(
        f"{b}: {', '.join(q for q in QUANTIZE_OF[b] if q) or 'none'}" for b in BACKENDS
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="torch",
        help="inference backend of both encoders (default torch; onnx: ONNX Runtime, openvino: "
        "OpenVINO, both on the CPU from an export made once per checkpoint and cached)",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        help=f"reduced precision of the backend ({offers}; default: float32)",
    )


def apply_backend(model: QRAGModel, args: argparse.Namespace) -> QRAGModel:
    """Set the backend the parsed arguments name on ``model`` (a no-op for torch float32).

    Raises:
        QRAGError: a quantization the backend does not offer, onnx or openvino off the CPU, or
            their libraries missing.
    """
    if (args.backend, args.quantize) != ("torch", None):
        model.set_backend(args.backend, args.quantize)
    return model


def backend_summary(model: QRAGModel) -> dict[str, Any]:
    """``{"backend": ..., "quantize": ...}`` of ``model``, for a run's summary."""
    backend, quantize = model.inference_backend
    return {"backend": backend, "quantize": quantize}
