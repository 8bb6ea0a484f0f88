"""``--backend`` / ``--quantize``: the inference backend of a command-line tool's encoders, the
options :meth:`QRAGModel.set_backend <qrag_integrations.core.model.QRAGModel.set_backend>` and
the retriever's ``backend`` / ``quantize`` fields take (``qrag-eval``, ``qrag-embed``); and
``--threads``, the retriever's ``threads`` (:mod:`~qrag_integrations.core.threads`)."""

from __future__ import annotations

import argparse
from typing import Any

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.onnx_backend import BACKENDS, QUANTIZE_OF
from qrag_integrations.core.threads import check_threads, set_process_threads

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


def _threads(value: str) -> int:
    """An argparse type: a thread count (an integer >= 1)."""
    try:
        number = int(value)
        check_threads(number)
    except (ValueError, QRAGError):
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value!r}") from None
    return number


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--threads`` (apply it with :func:`apply_threads`)."""
    parser.add_argument(
        "--threads",
        type=_threads,
        metavar="N",
        help="threads of the encoders and searches (torch, ONNX Runtime, OpenVINO, FAISS, "
        "SimSIMD); default: torch's count, and 1 for a search of fewer than 8 questions",
    )


def apply_threads(args: argparse.Namespace) -> int | None:
    """Set the process's thread count to ``--threads`` (a no-op without it) and return it, to be
    passed on as the searches' ``threads`` (:func:`~qrag_integrations.core.threads.set_process_threads`)."""
    set_process_threads(args.threads)
    return args.threads


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
