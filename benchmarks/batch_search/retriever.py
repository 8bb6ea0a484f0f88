"""``QRAGRetriever.batch`` against one ``invoke`` per question, on real text, side by side.

The framework-level sibling of ``run.py`` (which times ``MultiStepSearcher.search`` on a synthetic
index): the default model, an index of real paragraphs and the calls users make. Data: the
paragraphs of SQuAD v2 dev articles 0-16 (validation articles, as ``benchmarks/consistency``
loads them; 18-34 are never read), one chunk each, grouped by article (``metadata["source"]``),
their chunk embeddings cached (``benchmarks/harness/embedding_cache``), and ``--questions``
answerable questions of those articles sampled with ``--seed``.

For each ``--threads`` value, ``--reps`` rounds of three timings, in turn (every other round in
reverse order): the questions one ``invoke`` each, one ``batch`` of them, and one ``batch`` of a
LangChain chain holding the retriever inside a ``RunnableParallel`` (``{"context": retriever,
"question": passthrough}``, the README's chain: LangChain invokes the retriever once per question
from its thread pool). Printed: each one's median wall seconds and the ratio sequential / batch
(median of the rounds' ratios: a round's timings run back to back, so a busy machine slows both
sides alike), the same from the process's CPU seconds (all its threads; less sensitive to other
processes on the machine), the state encoder's share of each one's wall time (summed over
threads: above 1 where a chain's calls overlap), and whether each returned the sequential
results (ids, and Q-values within 1e-4). ``--store`` also times them over an embedded Qdrant collection holding the same
vectors (``from_store``; the model's rules do not run there).

    python -m benchmarks.batch_search.retriever --threads 2,1 --store --out benchmarks/batch_search/results/retriever_batch_squad.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableParallel, RunnablePassthrough

from benchmarks.consistency.run import ARTICLES, corpus
from benchmarks.harness import results as harness
from benchmarks.harness.embedding_cache import CACHE_DIR, cached_chunk_embeddings
from qrag_integrations import QRAGRetriever, load_model
from qrag_integrations.core.defaults import default_checkpoint
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel

RESULTS = Path(__file__).resolve().parent / "results"
#: Where the paragraphs' chunk embeddings are cached.
CACHE = CACHE_DIR
#: Q-values of a batch and of single calls agree within this (states encoded in one batch differ
#: from single encodes by float rounding).
Q_TOLERANCE = 1e-4
#: The timed calls of a round, in their order (every other round runs them in reverse).
CALLS = ("sequential_invoke", "batch", "chain_batch")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--questions", type=int, default=16, help="questions per batch")
    p.add_argument("--k", type=int, default=3, help="search steps = results per question")
    p.add_argument("--threads", default="2,1", help="comma-separated torch thread counts")
    p.add_argument("--reps", type=int, default=3, help="rounds per thread count (median)")
    p.add_argument("--seed", type=int, default=555565, help="question sample (validation)")
    p.add_argument("--checkpoint", default=None, help="model (default: the default model)")
    p.add_argument("--store", action="store_true", help="also over an embedded Qdrant collection")
    p.add_argument("--out", type=Path, default=RESULTS / "retriever_batch.json")
    return p.parse_args(argv)


def same_results(a: list[list[Any]], b: list[list[Any]]) -> float:
    """Share of questions whose documents (ids in order, Q-values within tolerance) agree."""

    def agree(x: list[Any], y: list[Any]) -> bool:
        return [d.id for d in x] == [d.id for d in y] and all(
            abs(d.metadata["qrag_q_value"] - e.metadata["qrag_q_value"]) <= Q_TOLERANCE
            for d, e in zip(x, y)
        )

    return statistics.mean(agree(x, y) for x, y in zip(a, b))


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, this process's CPU seconds, and ``fn()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


class EncoderClock:
    """Wall seconds spent in the model's state encoder (``embed_states``), from any thread."""

    def __init__(self, model: QRAGModel) -> None:
        self.seconds, self._lock, encode = 0.0, threading.Lock(), model.embed_states

        def timed_encode(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return encode(*args, **kwargs)
            finally:
                with self._lock:
                    self.seconds += time.perf_counter() - started

        model.embed_states = timed_encode  # type: ignore[method-assign]

    def read(self) -> float:
        """Seconds since the last read."""
        with self._lock:
            seconds, self.seconds = self.seconds, 0.0
        return seconds


def measure(
    retriever: QRAGRetriever, questions: list[str], reps: int, clock: EncoderClock
) -> dict[str, Any]:
    """Wall and CPU seconds of sequential ``invoke``, ``batch`` and a chain's ``batch``, and the
    state encoder's share of the wall seconds."""
    chain = RunnableParallel(context=retriever, question=RunnablePassthrough())
    calls: dict[str, Callable[[], list[list[Any]]]] = {
        "sequential_invoke": lambda: [retriever.invoke(q) for q in questions],
        "batch": lambda: retriever.batch(questions),
        "chain_batch": lambda: [c["context"] for c in chain.batch(questions)],
    }
    retriever.invoke(questions[0])  # warm-up: first calls build caches (BM25, layouts)
    retriever.batch(questions[:2])
    rounds = []
    for rep in range(reps):
        order = CALLS if rep % 2 == 0 else CALLS[::-1]
        got, encoder = {}, {}
        for name in order:
            clock.read()
            got[name] = timed(calls[name])
            encoder[name] = clock.read()
        base = got["sequential_invoke"][2]
        rounds.append(
            {f"wall_{n}": got[n][0] for n in CALLS}
            | {f"cpu_{n}": got[n][1] for n in CALLS}
            | {f"encoder_{n}": encoder[n] for n in CALLS}
            | {f"same_results_{n}": same_results(got[n][2], base) for n in CALLS[1:]}
        )

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    def ratio(kind: str, name: str) -> float:
        return statistics.median(
            r[f"{kind}_sequential_invoke"] / r[f"{kind}_{name}"] for r in rounds
        )

    return (
        {f"seconds_{n}": median(f"wall_{n}") for n in CALLS}
        | {f"ratio_{n}": ratio("wall", n) for n in CALLS[1:]}
        | {f"cpu_seconds_{n}": median(f"cpu_{n}") for n in CALLS}
        | {f"cpu_ratio_{n}": ratio("cpu", n) for n in CALLS[1:]}
        | {f"encoder_share_{n}": median(f"encoder_{n}") / median(f"wall_{n}") for n in CALLS}
        | {f"same_results_{n}": min(r[f"same_results_{n}"] for r in rounds) for n in CALLS[1:]}
        | {"rounds": rounds}
    )


def retrievers(model: QRAGModel, docs: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    """The in-memory retriever of the paragraphs (cached embeddings) and, with ``--store``, one
    over an embedded Qdrant collection holding the same vectors."""
    texts = [d.page_content for d in docs]
    metadatas = [dict(d.metadata) for d in docs]
    ids, doc_ids = [d.id for d in docs], [d.metadata["source"] for d in docs]
    vectors, _ = cached_chunk_embeddings(model, texts, CACHE)
    index = ChunkIndex(model.embedding_dim)
    index.add(texts, vectors, metadatas, ids, doc_ids)
    checkpoint = args.checkpoint or default_checkpoint()
    out: dict[str, Any] = {
        "memory": QRAGRetriever(model=model, index=index, checkpoint=checkpoint, k=args.k)
    }
    if args.store:
        from qdrant_client import QdrantClient

        from qrag_integrations.stores.qdrant import QdrantSource
        from qrag_integrations.stores.rows import model_fingerprint, plan_rows

        client = QdrantClient(":memory:")
        source = QdrantSource(client, "paragraphs", model)
        rows, next_rank = plan_rows(
            texts, model_fingerprint(model), lambda d: None, 0, metadatas, ids, doc_ids
        )
        source.write_vectors(rows, vectors.numpy(), next_rank)
        out["qdrant_store"] = QRAGRetriever.from_store(
            client, collection_name="paragraphs", model=model, checkpoint=checkpoint, k=args.k
        )
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t]
    harness.set_threads(threads[0])
    docs, sample = corpus(args.seed, args.questions)
    questions = [q for q, _ in sample]
    model = load_model(args.checkpoint or default_checkpoint()).eval()
    built, _, paths = timed(lambda: retrievers(model, docs, args))
    print(f"{len(docs)} paragraphs indexed in {built:.0f} s", flush=True)
    clock = EncoderClock(model)
    rows = []
    for t in threads:
        harness.set_threads(t)
        for name, retriever in paths.items():
            load = os.getloadavg()[0]
            row = {"threads": t, "path": name, **measure(retriever, questions, args.reps, clock)}
            row["load_average_1min"] = [load, os.getloadavg()[0]]
            rows.append(row)
            print(
                f"{name}, {t} thread(s), {args.questions} questions, k={args.k}: "
                f"invokes {row['seconds_sequential_invoke']:.2f} s, batch "
                f"{row['seconds_batch']:.2f} s (ratio {row['ratio_batch']:.2f}; CPU time "
                f"{row['cpu_ratio_batch']:.2f}), chain batch {row['seconds_chain_batch']:.2f} s "
                f"(ratio {row['ratio_chain_batch']:.2f}; CPU time "
                f"{row['cpu_ratio_chain_batch']:.2f}); state encoder's share of the time: "
                f"invokes {row['encoder_share_sequential_invoke']:.2f}, batch "
                f"{row['encoder_share_batch']:.2f}; same results: batch "
                f"{row['same_results_batch']:.2f}, chain {row['same_results_chain_batch']:.2f}; "
                f"load {row['load_average_1min'][0]:.1f}-{row['load_average_1min'][1]:.1f}",
                flush=True,
            )
    result = {
        **harness.provenance(argv, threads[0]),
        "split": "validation",
        "data": f"SQuAD v2 dev articles 0-{ARTICLES - 1}, one chunk per paragraph",
        "paragraphs": len(docs),
        "questions": args.questions,
        "seed": args.seed,
        "checkpoint": args.checkpoint or default_checkpoint(),
        "k": args.k,
        "reps": args.reps,
        "rows": rows,
    }
    harness.write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
