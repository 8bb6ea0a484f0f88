"""What checking the digests adds to loading a large saved index.

Saves a :class:`~qrag_integrations.core.index.ChunkIndex` of ``--size`` chunks (random float32
embeddings of ``--dim``, ~80-character texts with metadata), then loads it ``--rounds`` times
with the digest check and as many times without it (the check replaced by a no-op), alternating,
after one untimed load of each (the files are then in the page cache, as for a warm load).
Reports the median load time of each and their ratio (of the medians), and the median time of
the digest check alone (``verify_files`` over the folder), a steadier figure on a busy machine.

    python -m benchmarks.fault_injection.verify_cost --size 400000 --out benchmarks/fault_injection/results/verify_cost.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

from benchmarks.harness.results import provenance, set_threads, write_json
from qrag_integrations.core import index_files
from qrag_integrations.core.index import ChunkIndex


def timed_load(path: Path, verify: bool) -> float:
    """Seconds for one :meth:`ChunkIndex.load` of ``path``, with or without the digest check."""
    start = time.perf_counter()
    if verify:
        ChunkIndex.load(path)
    else:
        with mock.patch.object(index_files, "verify_files"):
            ChunkIndex.load(path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=400_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    set_threads(1)
    index = ChunkIndex(args.dim)
    texts = [
        f"chunk {i}: a sentence of about eighty characters, made unique by its number."
        for i in range(args.size)
    ]
    metas = [{"doc": f"d{i // 50}", "n": i} for i in range(args.size)]
    index.add(texts, torch.randn(args.size, args.dim), metadatas=metas)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index"
        index.save(path)
        bytes_on_disk = sum(f.stat().st_size for f in path.iterdir())
        timed_load(path, True), timed_load(path, False)  # warm the page cache
        times: dict[str, list[float]] = {"verified": [], "unverified": []}
        times["check_alone"] = []
        manifest = index_files.read_index_manifest(path)
        for _ in range(args.rounds):
            times["verified"].append(timed_load(path, True))
            times["unverified"].append(timed_load(path, False))
            start = time.perf_counter()
            index_files.verify_files(path, manifest, index_files.MANIFEST_FILE, "")
            times["check_alone"].append(time.perf_counter() - start)
    medians = {k: statistics.median(v) for k, v in times.items()}
    result = {
        **provenance(argv, threads=1),
        "size": args.size,
        "dim": args.dim,
        "bytes_on_disk": bytes_on_disk,
        "seconds": {k: [round(t, 3) for t in v] for k, v in times.items()},
        "median_seconds": {k: round(v, 3) for k, v in medians.items()},
        "ratio_of_medians": round(medians["verified"] / medians["unverified"], 3),
        "check_alone_share_of_unverified_load": round(
            medians["check_alone"] / medians["unverified"], 3
        ),
    }
    print(result["median_seconds"], result["ratio_of_medians"])
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    main()
