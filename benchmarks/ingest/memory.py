"""Peak memory of streaming embedding (``qrag-embed``) at several corpus sizes, next to holding
every embedding at once.

For each size N, the first N real sentences of ``ingest/run.py``'s sample (Shakespeare, seed 0;
so a smaller corpus is a prefix of a larger one) are written one per line to a ``.txt`` corpus and
embedded in a fresh process by the command

    python -m qrag_integrations.ingest.cli CORPUS --cache DIR --threads 1 --shard-rows 1000

(run in-process by a small wrapper, see ``CHILD``). Recorded per run: the process's peak resident
memory, its wall seconds (interpreter start and model loading included), the embedding pass's own
seconds and chunks/s as the command reports them, and the bytes of the shard cache.

Also measured, each in its own fresh process:

* ``in_memory`` (``--baseline-sizes``): load the same model, read the whole corpus into a list and
  embed it with one ``model.embed_chunks`` call, which holds all N x D embeddings at once.
* ``qdrant`` (``--qdrant-sizes``; default: the largest size): ``qrag-embed --qdrant-path`` run again
  on that size's cache. Its embedding pass finds every shard done (checks them, embeds nothing), so
  the run measures the store pass: every shard written to an on-disk local-mode Qdrant collection.
  Local mode holds the collection in the process and warns above 20,000 points (refused here).
* ``model_only``: load the model, embed nothing: the floor under all of the above.

    python -m benchmarks.ingest.memory --sizes 2000,8000 --threads 1

Writes ``benchmarks/ingest/results/streaming_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import results as harness
from benchmarks.ingest.child import child_machine_info, mb, thread_env

RESULTS = Path(__file__).resolve().parent / "results"
#: The repository root: the child puts it on ``sys.path`` to import ``benchmarks.harness``.
REPO = Path(__file__).resolve().parents[2]

#: Local-mode Qdrant warns above this many points.
QDRANT_LOCAL_MAX = 20_000


#: Run by a fresh interpreter: ``python -c CHILD REPO_DIR MODE ARGS...``. Its last stdout line
#: is JSON with the process's peak RSS and where it imported ``qrag_integrations`` from.
#:
#: Why VmHWM of the child itself: ``/proc/self/status`` VmHWM is the high-water mark of the
#: address space the process got at exec, so it counts this run only. The alternatives count more:
#: ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` is the maximum over every child waited for so far, and
#: on Linux even one child's ``ru_maxrss`` (``os.wait4``) includes the parent's peak, carried over
#: the vfork + exec that ``subprocess`` uses (checked here: a parent holding 400 MB saw 421,400 KiB
#: for a child whose own VmHWM was 10,944 KiB). Running ``embed_cli.main`` in-process is what the
#: ``qrag-embed`` console script does.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from benchmarks.harness.proc_stats import peak_rss_bytes
mode, args = sys.argv[2], sys.argv[3:]
if mode == "cli":
    from qrag_integrations.ingest.cli import main
    main(args)
else:
    import torch
    from qrag_integrations.core.loading import load_model
    corpus, checkpoint, threads, batch = args
    torch.set_num_threads(int(threads))
    model = load_model(checkpoint or None)
    if mode == "in_memory":
        with open(corpus, encoding="utf-8") as fh:
            texts = [line.removesuffix("\n") for line in fh if line.strip()]
        start = time.perf_counter()
        emb = model.embed_chunks(texts, batch_size=int(batch), out_dtype=torch.float32).cpu()
        seconds = time.perf_counter() - start
        print(json.dumps({"mode": mode, "rows": emb.shape[0], "dim": emb.shape[1], "seconds": seconds,
                          "embeddings_bytes": emb.numel() * emb.element_size()}))
    else:
        print(json.dumps({"mode": mode, "dim": model.embedding_dim}))
import qrag_integrations
print(json.dumps({"peak_rss_bytes": peak_rss_bytes(), "qrag_integrations": qrag_integrations.__path__[0]}))
"""


def sizes(value: str) -> list[int]:
    """An argparse type: comma-separated chunk counts (>= 1), or an empty string for none."""
    out = [int(v) for v in value.split(",") if v.strip()]
    if any(n < 1 for n in out):
        raise argparse.ArgumentTypeError(f"sizes must be >= 1, got {value!r}")
    return out


def run_child(
    mode: str, args: list[str], threads: int, package: str
) -> tuple[list[dict], int, float]:
    """Run ``CHILD`` in a fresh interpreter; its JSON stdout lines (the wrapper's last line
    dropped), its peak RSS in bytes and its wall seconds."""
    env = {**os.environ, **thread_env(threads)}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO), mode, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} run failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    *lines, peak = lines
    if peak["peak_rss_bytes"] is None:
        raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")
    if peak["qrag_integrations"] != package:  # same code as the one code_version() names
        raise RuntimeError(
            f"the child imported qrag_integrations from {peak['qrag_integrations']}, "
            f"not {package}: set PYTHONPATH"
        )
    return lines, int(peak["peak_rss_bytes"]), wall


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=sizes, default=[2000, 8000], help="corpus sizes in chunks (streaming runs)"
    )
    parser.add_argument(
        "--baseline-sizes",
        type=sizes,
        default=None,
        help="sizes of the in-memory baseline (default: --sizes; '' for none)",
    )
    parser.add_argument(
        "--qdrant-sizes",
        type=sizes,
        default=None,
        help="sizes written to local Qdrant from their cache (default: the largest; '' for none)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch / OpenMP / tokenizer threads in each run"
    )
    parser.add_argument("--shard-rows", type=int, default=1000, help="chunks per shard")
    parser.add_argument("--batch-size", type=int, default=64, help="chunks per forward pass")
    parser.add_argument(
        "--checkpoint", default="", help="qrag-embed --checkpoint (default: its default model)"
    )
    parser.add_argument(
        "--workdir", help="folder for the corpora, caches and Qdrant (default: a temporary one)"
    )
    parser.add_argument("--out", default=str(RESULTS / "streaming_memory.json"))
    args = parser.parse_args(argv)
    baseline = args.sizes if args.baseline_sizes is None else args.baseline_sizes
    qdrant = [max(args.sizes)] if args.qdrant_sizes is None else args.qdrant_sizes
    if not set(qdrant) <= set(args.sizes):
        parser.error("--qdrant-sizes must be among --sizes (they reuse those caches)")
    if any(n > QDRANT_LOCAL_MAX for n in qdrant):
        parser.error(f"local-mode Qdrant is not meant for more than {QDRANT_LOCAL_MAX} points")

    from benchmarks.harness.texts import shakespeare_sentences

    code = harness.code_version()
    texts = shakespeare_sentences(max(args.sizes + baseline), seed=0)
    model_args = [args.checkpoint, str(args.threads), str(args.batch_size)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        [loaded], floor, floor_wall = run_child(
            "model_only", ["", *model_args], args.threads, code["qrag_integrations"]
        )
        rows = []
        for n in sorted(set(args.sizes + baseline)):
            corpus = work / f"corpus-{n}.txt"
            corpus.write_text("".join(t + "\n" for t in texts[:n]), encoding="utf-8", newline="\n")
            row: dict = {"chunks": n, "corpus_bytes": corpus.stat().st_size}
            cli = [
                str(corpus),
                "--cache",
                str(work / f"cache-{n}"),
                "--threads",
                str(args.threads),
                "--shard-rows",
                str(args.shard_rows),
                "--batch-size",
                str(args.batch_size),
            ]
            cli += ["--checkpoint", args.checkpoint] if args.checkpoint else []
            if n in args.sizes:
                [summary], peak, wall = run_child(
                    "cli", cli, args.threads, code["qrag_integrations"]
                )
                assert summary["rows"] == summary["embedded_now"] == n, summary
                row["streaming"] = {
                    "peak_rss_bytes": peak,
                    "peak_rss_mb": mb(peak),
                    "wall_seconds": round(wall, 2),
                    "embed_seconds": summary["seconds"],
                    "embed_chunks_per_s": round(n / summary["seconds"], 1),
                    "shards": summary["shards"],
                    "cache_bytes": folder_bytes(Path(summary["folder"])),
                }
            if n in baseline:
                [summary], peak, wall = run_child(
                    "in_memory", [str(corpus), *model_args], args.threads, code["qrag_integrations"]
                )
                assert summary["rows"] == n, summary
                row["in_memory"] = {
                    "peak_rss_bytes": peak,
                    "peak_rss_mb": mb(peak),
                    "wall_seconds": round(wall, 2),
                    "embed_seconds": round(summary["seconds"], 2),
                    "embed_chunks_per_s": round(n / summary["seconds"], 1),
                    "embeddings_bytes": summary["embeddings_bytes"],
                }
            if n in qdrant:
                path = work / f"qdrant-{n}"
                [embedded, stored], peak, wall = run_child(
                    "cli",
                    [*cli, "--qdrant-path", str(path)],
                    args.threads,
                    code["qrag_integrations"],
                )
                assert (
                    embedded["embedded_now"] == 0 and stored["points"] == stored["written_now"] == n
                )
                row["qdrant_from_cache"] = {
                    "peak_rss_bytes": peak,
                    "peak_rss_mb": mb(peak),
                    "wall_seconds": round(wall, 2),
                    "cache_check_seconds": embedded["seconds"],
                    "write_seconds": stored["seconds"],
                    "write_chunks_per_s": round(n / stored["seconds"], 1),
                    "points": stored["points"],
                    "qdrant_bytes": folder_bytes(path),
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
    dim = loaded["dim"]
    out = {
        "benchmark": "streaming_memory",
        "command": harness.command_line(argv),
        "code": code,
        "machine": child_machine_info(args.threads),
        "model": args.checkpoint or "qrag-embed's default (packaged all-MiniLM-L6-v2)",
        "method": "each run is a fresh process; peak RSS = its VmHWM (/proc/self/status) at the end; wall "
        "seconds include interpreter start and model loading; embed seconds are the embedding "
        "pass's own (qrag-embed's summary, or around the one embed_chunks call)",
        "shard_rows": args.shard_rows,
        "batch_size": args.batch_size,
        "model_only": {
            "peak_rss_bytes": floor,
            "peak_rss_mb": mb(floor),
            "wall_seconds": round(floor_wall, 2),
        },
        "sizes": rows,
        "arithmetic": {
            "note": "not measured: the bytes of the embeddings alone (float32, dim D), what each way holds",
            "dim": dim,
            "streaming_one_shard_bytes": args.shard_rows * dim * 4,
            "in_memory_bytes_at_400000_chunks": 400_000 * dim * 4,
        },
    }
    harness.write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
