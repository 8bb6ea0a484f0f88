"""Streaming embedding throughput: ``embed_corpus`` into shards, then shards into Qdrant (local mode).

A slice of real sentences (public-domain Shakespeare, as ``index_build/run.py``) is embedded
with the packaged all-MiniLM-L6-v2 through :func:`qrag_integrations.ingest.sharded.embed_corpus`
(shards on disk), read back with ``read_shards`` and written to an on-disk local-mode Qdrant
collection with ``streaming_store.write_shards``. The run is timed in three parts (embed, read,
write), and the time for a larger corpus is *extrapolated* linearly from the measured rates
(tokens per chunk measured on the slice). Nothing of the larger corpus is run.

    python -m benchmarks.ingest.run --n 5000 --threads 1

Writes ``benchmarks/ingest/results/streaming_embed.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import results as harness
from benchmarks.harness.texts import shakespeare_sentences

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="chunks embedded (the measured slice)")
    parser.add_argument("--threads", type=int, default=1, help="torch / OpenMP threads")
    parser.add_argument("--shard-rows", type=int, default=1000, help="chunks per shard")
    parser.add_argument("--batch-size", type=int, default=64, help="chunks per forward pass")
    parser.add_argument(
        "--extrapolate-chunks", type=int, default=400_000, help="corpus size to extrapolate to"
    )
    parser.add_argument("--out", default=str(RESULTS / "streaming_embed.json"))
    args = parser.parse_args(argv)
    harness.set_threads(args.threads)

    from qdrant_client import QdrantClient

    from qrag_integrations import QRAGConfig, QRAGModel
    from qrag_integrations.ingest.sharded import embed_corpus, read_shards
    from qrag_integrations.ingest.sharded_store import write_shards
    from qrag_integrations.stores.qdrant import QdrantSource

    texts = shakespeare_sentences(args.n, seed=0)
    model = QRAGModel.from_base(QRAGConfig())
    tokens = [
        len(
            model.tokenizer(t, truncation=True, max_length=model.config.max_chunk_tokens)[
                "input_ids"
            ]
        )
        for t in texts
    ]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = embed_corpus(
            model,
            iter(texts),
            Path(tmp) / "cache",
            shard_rows=args.shard_rows,
            batch_size=args.batch_size,
        )
        embed_s = time.perf_counter() - started
        started = time.perf_counter()
        rows = sum(len(s.ids) for s in read_shards(result.folder, model))
        read_s = time.perf_counter() - started
        source = QdrantSource(QdrantClient(path=str(Path(tmp) / "qdrant")), "corpus", model)
        started = time.perf_counter()
        written = write_shards(source, read_shards(result.folder, model), iter(texts))
        write_s = time.perf_counter() - started
        count = source.count()
        cache_bytes = sum(p.stat().st_size for p in result.folder.iterdir())
    assert rows == written == count == args.n
    per_chunk_s = (embed_s + read_s + write_s) / args.n
    mean_tokens = statistics.mean(tokens)
    out = {
        "benchmark": "streaming_embed",
        "command": harness.command_line(argv),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu", note="2 cores shared with other jobs"),
        "model": "packaged all-MiniLM-L6-v2 (QRAGConfig() defaults, max_chunk_tokens "
        f"{model.config.max_chunk_tokens})",
        "measured": {
            "chunks": args.n,
            "shard_rows": args.shard_rows,
            "batch_size": args.batch_size,
            "mean_tokens_per_chunk": round(mean_tokens, 1),
            "tokens": int(sum(tokens)),
            "embed_seconds": round(embed_s, 2),
            "embed_chunks_per_s": round(args.n / embed_s, 1),
            "read_seconds": round(read_s, 2),
            "qdrant_write_seconds": round(write_s, 2),
            "qdrant_write_chunks_per_s": round(args.n / write_s, 1),
            "cache_bytes": cache_bytes,
        },
        "extrapolation": {
            "note": "linear in the number of chunks from the measured slice; not run",
            "chunks": args.extrapolate_chunks,
            "tokens": int(args.extrapolate_chunks * mean_tokens),
            "embed_hours": round(args.extrapolate_chunks * embed_s / args.n / 3600, 2),
            "total_hours": round(args.extrapolate_chunks * per_chunk_s / 3600, 2),
            "cache_gb": round(cache_bytes / args.n * args.extrapolate_chunks / 1e9, 2),
        },
    }
    harness.write_json(args.out, out)
    print(out["measured"], out["extrapolation"], sep="\n")
    return out


if __name__ == "__main__":
    main()
