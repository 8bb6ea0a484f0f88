"""Resident memory after every shard of one long ``embed_corpus`` run: does it level off?

For each variant, a fresh process loads the model and embeds the first N real sentences of
``ingest/run.py``'s sample (Shakespeare, seed 0, as in ``ingest/memory.py``) with
:func:`qrag_integrations.ingest.sharded.embed_corpus` in shards of ``--shard-rows``. Its ``progress``
callback records, after every shard: the process's current resident memory (``VmRSS``) and its
peak so far (``VmHWM``, both from ``/proc/self/status``), glibc's heap statistics (``mallinfo2``:
bytes in use, bytes free but kept) and the number of objects Python's garbage collector tracks.

Variants:

* ``off``: ``streaming.release_freed_memory`` replaced by a no-op (the code before it was added);
* ``on``: the library as it is (``malloc_trim(0)`` after every shard on glibc);
* ``gc``: like ``off``, plus ``gc.collect()`` in the callback (is anything left to collect?).

    python -m benchmarks.ingest.rss --chunks 12000 --shard-rows 500 --variants off,on --threads 1

Writes ``benchmarks/ingest/results/streaming_rss_per_shard.json``.
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

VARIANTS = ("off", "on", "gc")

#: Run by a fresh interpreter: ``python -c CHILD CORPUS ROOT VARIANT CHECKPOINT THREADS SHARD_ROWS BATCH``.
#: Prints one JSON line: the per-shard records and where it imported ``qrag_integrations`` from.
CHILD = r"""
import ctypes, gc, json, os, sys, time
corpus, root, variant, checkpoint, threads, shard_rows, batch = sys.argv[1:]
import torch
torch.set_num_threads(int(threads))
import qrag_integrations
from qrag_integrations.ingest import sharded as streaming
from qrag_integrations.core.loading import load_model

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

try:
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallInfo2
except AttributeError:  # not glibc >= 2.33
    mallinfo2 = None

def status():
    out = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out

def record(shard, rows, start):
    s = status()
    rec = {"shard": shard, "rows": rows, "seconds": round(time.perf_counter() - start, 2),
           "rss_bytes": s["VmRSS"], "hwm_bytes": s["VmHWM"], "gc_objects": len(gc.get_objects())}
    if mallinfo2 is not None:
        m = mallinfo2()
        # in use: allocated blocks of the heaps plus mmapped blocks; free: kept by malloc, not returned
        rec.update(heap_in_use_bytes=m.uordblks + m.hblkhd, heap_free_bytes=m.fordblks,
                   heap_arena_bytes=m.arena, heap_mmapped_bytes=m.hblkhd)
    return rec

model = load_model(checkpoint or None)
if variant in ("off", "gc"):
    streaming.release_freed_memory = lambda: False
records = []
start = time.perf_counter()
records.append(record(0, 0, start))

def progress(rows, shards):
    if variant == "gc":
        gc.collect()
    records.append(record(shards, rows, start))

with open(corpus, encoding="utf-8") as fh:
    texts = (line.removesuffix("\n") for line in fh)
    result = streaming.embed_corpus(model, texts, root, shard_rows=int(shard_rows), batch_size=int(batch),
                                    progress=progress)
print(json.dumps({"variant": variant, "rows": result.rows, "shards": result.shards, "records": records,
                  "embed_seconds": round(time.perf_counter() - start, 2),
                  "qrag_integrations": qrag_integrations.__path__[0]}))
"""


def variants(value: str) -> list[str]:
    """An argparse type: comma-separated variants."""
    out = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in out if v not in VARIANTS]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"variants must be among {VARIANTS}, got {value!r}")
    return out


def summary(records: list[dict]) -> dict:
    """First, middle and last shard's RSS and peak, and the peak's rise over the second half."""
    shards = records[1:]
    first, middle, last = shards[0], shards[(len(shards) - 1) // 2], shards[-1]
    pick = {"first": first, "middle": middle, "last": last}
    return {
        "after_model_load_rss_mb": mb(records[0]["rss_bytes"]),
        **{f"{k}_shard": v["shard"] for k, v in pick.items()},
        **{f"{k}_rss_mb": mb(v["rss_bytes"]) for k, v in pick.items()},
        **{f"{k}_hwm_mb": mb(v["hwm_bytes"]) for k, v in pick.items()},
        "hwm_rise_middle_to_last_mb": mb(last["hwm_bytes"] - middle["hwm_bytes"]),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=12000, help="corpus size in chunks")
    parser.add_argument("--shard-rows", type=int, default=500, help="chunks per shard")
    parser.add_argument("--batch-size", type=int, default=64, help="chunks per forward pass")
    parser.add_argument(
        "--variants", type=variants, default=["off", "on"], help=f"among {VARIANTS}"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch / OpenMP / tokenizer threads")
    parser.add_argument(
        "--checkpoint", default="", help="load_model's checkpoint (default: its default model)"
    )
    parser.add_argument(
        "--workdir", help="folder for the corpus and caches (default: a temporary one)"
    )
    parser.add_argument("--out", default=str(RESULTS / "streaming_rss_per_shard.json"))
    args = parser.parse_args(argv)
    if args.chunks < 1 or args.shard_rows < 1:
        parser.error("--chunks and --shard-rows must be >= 1")

    from benchmarks.harness.texts import shakespeare_sentences

    code = harness.code_version()
    texts = shakespeare_sentences(args.chunks, seed=0)
    env = {**os.environ, **thread_env(args.threads)}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        corpus = work / f"corpus-{args.chunks}.txt"
        corpus.write_text("".join(t + "\n" for t in texts), encoding="utf-8", newline="\n")
        for variant in args.variants:
            child = [
                sys.executable,
                "-c",
                CHILD,
                str(corpus),
                str(work / f"cache-{variant}"),
                variant,
                args.checkpoint,
                str(args.threads),
                str(args.shard_rows),
                str(args.batch_size),
            ]
            start = time.perf_counter()
            proc = subprocess.run(child, capture_output=True, text=True, env=env, check=False)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"{variant} run failed (exit {proc.returncode}): {proc.stderr[-3000:]}"
                )
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            if run.pop("qrag_integrations") != code["qrag_integrations"]:
                raise RuntimeError("the child imported another qrag_integrations: set PYTHONPATH")
            assert run["rows"] == args.chunks, run
            run["wall_seconds"] = round(time.perf_counter() - start, 2)
            run["summary"] = summary(run["records"])
            runs.append(run)
            print(json.dumps({"variant": variant, **run["summary"]}), flush=True)
    out = {
        "benchmark": "streaming_rss_per_shard",
        "command": harness.command_line(argv),
        "code": code,
        "machine": child_machine_info(args.threads),
        "model": args.checkpoint or "load_model's default model",
        "method": "each variant is a fresh process; after model loading and after every shard (embed_corpus's "
        "progress callback) it reads VmRSS and VmHWM from /proc/self/status, glibc mallinfo2 and "
        "len(gc.get_objects())",
        "chunks": args.chunks,
        "shard_rows": args.shard_rows,
        "batch_size": args.batch_size,
        "runs": runs,
    }
    harness.write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
