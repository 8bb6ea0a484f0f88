"""sentence-transformers' own backends on the index-build texts: ``backend="torch"`` against
``backend="onnx"`` (ONNX Runtime, exported by ``optimum-onnx``), same model, texts and batches.

``optimum-onnx`` requires ``transformers < 4.58`` and this project runs 5.x, so this script runs
in a separate environment and reads the texts from a file that the main environment writes::

    # main environment: the texts of benchmarks/index_build/run.py (3,000 sentences, seed 0)
    python -m benchmarks.index_build.st_backends --write-texts /tmp/texts.json
    # an environment with: torch, "transformers<4.58", sentence-transformers, optimum-onnx[onnxruntime]
    python benchmarks/index_build/st_backends.py --texts /tmp/texts.json --model PATH/TO/all-MiniLM-L6-v2 \\
        --threads 1 --out benchmarks/index_build/results/st_backends_1thread.json

Runs alternate between the backends (warm-up first), median of ``--reps``; the model folder is
copied to a temporary folder first, so the ONNX export never writes into it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def write_texts(path: Path, n: int, seed: int) -> None:
    """The index-build benchmark's sentences, as a JSON list (main environment only)."""
    from benchmarks.harness.texts import shakespeare_sentences

    path.write_text(json.dumps(shakespeare_sentences(n, seed)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write-texts", type=Path, help="write the texts to this file and stop")
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--texts", type=Path, help="JSON list of texts (from --write-texts)")
    p.add_argument("--model", type=Path, help="a sentence-transformers model folder")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.write_texts:
        write_texts(args.write_texts, args.n, args.seed)
        return 0
    if not (args.texts and args.model and args.out):
        p.error("--texts, --model and --out are needed (or --write-texts)")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import numpy as np
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    texts = json.loads(args.texts.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        shutil.copytree(args.model, folder)
        models = {
            "torch": SentenceTransformer(str(folder), device="cpu", backend="torch"),
            "onnx": SentenceTransformer(
                str(folder),
                device="cpu",
                backend="onnx",
                model_kwargs={
                    "provider": "CPUExecutionProvider",
                    "export": True,
                    "session_options": _session_options(args.threads),
                },
            ),
        }
        for m in models.values():
            m.max_seq_length = args.max_len

        def encode(name: str):
            return models[name].encode(texts, batch_size=args.batch_size, show_progress_bar=False)

        a, b = encode("torch"), encode("onnx")  # warm-up, and the same numbers?
        cos = float(
            np.min((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))
        )
        seconds: dict[str, list[float]] = {name: [] for name in models}
        for r in range(args.reps):
            for name in models if r % 2 == 0 else reversed(list(models)):
                started = time.perf_counter()
                encode(name)
                seconds[name].append(time.perf_counter() - started)
    cps = {name: len(texts) / statistics.median(s) for name, s in seconds.items()}
    result = {
        "benchmark": "index_build/st_backends",
        "command": "python " + " ".join(sys.argv),
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "threads": args.threads,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "texts": len(texts),
        "batch_size": args.batch_size,
        "max_len": args.max_len,
        "reps": args.reps,
        "seconds": seconds,
        "chunks_per_second": cps,
        "onnx_vs_torch": cps["onnx"] / cps["torch"],
        "cosine_onnx_vs_torch_min": cos,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("chunks_per_second", "onnx_vs_torch")}, indent=1))
    return 0


def _session_options(threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    return options


if __name__ == "__main__":
    raise SystemExit(main())
