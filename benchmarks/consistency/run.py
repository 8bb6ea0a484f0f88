"""Same documents, another order of arrival: does the default retriever pick the same chunks?

Real text: the paragraphs of SQuAD v2 dev articles 0-16 (validation articles; 18-34 are never
read), as LangChain ``Document``\\ s, one chunk each; a seeded sample of answerable questions,
each with its own paragraph as support. The same paragraphs are added in ``--orders`` shuffled
orders (the first: file order), two ways:

- ``own``: no document named, each paragraph its own document;
- ``articles``: ``metadata["source"]`` = the article, paragraphs of an article in file order,
  the articles shuffled (and interleaved in the order of arrival).

For each way it prints the share of questions whose ``k`` picks are the same (ids, in order) as
in file order, and hit@k of each order (the question's paragraph among the picks).

``--paths``: the same paragraphs (grouped by article) searched in memory, with ``scan="int8"``,
and over Qdrant (local mode), LangChain's ``InMemoryVectorStore`` and LlamaIndex's
``SimpleVectorStore``, each filled through the retriever; the share of questions whose picks
equal the in-memory search's. ``--framework-filled`` adds a LangChain ``InMemoryVectorStore``
filled the LangChain way (``InMemoryVectorStore.from_documents(docs, QRAGEmbeddings(model))``)
and searched in place; ``--rules-off`` runs every path with ``lexical_depth=0, supersede=False``.

    python -m benchmarks.consistency.run --questions 300 --orders 3 --out benchmarks/consistency/results/order_val.json
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from langchain_core.documents import Document
from qrag_training.data.squad import read_articles

from benchmarks.harness.results import provenance, set_threads, write_json
from qrag_integrations import QRAGRetriever
from qrag_integrations.core.defaults import default_checkpoint

ARTICLES = 17


def corpus(seed: int, n: int) -> tuple[list[Document], list[tuple[str, str]]]:
    """Every paragraph as a Document (id ``a<article>p<paragraph>``), and ``n`` seeded
    ``(question, paragraph id)`` pairs."""
    docs, questions = [], []
    for a, article in enumerate(read_articles(ARTICLES)):
        for p, para in enumerate(article["paragraphs"]):
            pid = f"a{a}p{p}"
            docs.append(
                Document(
                    id=pid, page_content=para["context"], metadata={"source": article["title"]}
                )
            )
            questions += [(qa["question"], pid) for qa in para["qas"] if not qa["is_impossible"]]
    return docs, random.Random(seed).sample(questions, n)


def arrival(docs: list[Document], way: str, rng: random.Random) -> list[Document]:
    """``docs`` in a new order of arrival: any order (``own``), or each article's paragraphs in
    file order, the articles interleaved at random (``articles``)."""
    if way == "own":
        return rng.sample(docs, len(docs))
    queues: dict[str, list[Document]] = {}
    for d in docs:
        queues.setdefault(d.metadata["source"], []).append(d)
    slots = [s for s, q in queues.items() for _ in q]
    rng.shuffle(slots)
    return [queues[s].pop(0) for s in slots]


def picks(docs: list[Document], way: str, questions: list[str], k: int) -> list[list[str]]:
    if way == "own":  # no document named: drop the source
        docs = [Document(id=d.id, page_content=d.page_content) for d in docs]
    retriever = QRAGRetriever.from_documents(docs, checkpoint=default_checkpoint(), k=k)
    return [[h.chunk.id for h in hits] for hits in retriever.search(questions, k=k)]


def path_retrievers(
    k: int, filled: list[Document] | None = None, **fields: Any
) -> dict[str, QRAGRetriever]:
    """An empty retriever of the default model per search path (``fields`` on each); with
    ``filled``, also one over a LangChain store holding them, filled the LangChain way."""
    from langchain_core.vectorstores import InMemoryVectorStore
    from llama_index.core.vector_stores import SimpleVectorStore
    from qdrant_client import QdrantClient

    from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

    memory = QRAGRetriever(checkpoint=default_checkpoint(), k=k, **fields)
    model = memory.model
    stores = {
        "qdrant": {"store": QdrantClient(":memory:"), "collection_name": "paragraphs"},
        "langchain": {"store": InMemoryVectorStore(embedding=QRAGEmbeddings(model))},
        "llama_index": {"store": SimpleVectorStore()},
    }
    out = {
        "memory": memory,
        "int8": QRAGRetriever(
            model=model, checkpoint=default_checkpoint(), k=k, scan="int8", **fields
        ),
        **{
            name: QRAGRetriever.from_store(model=model, k=k, **store, **fields)
            for name, store in stores.items()
        },
    }
    if filled is not None:
        store = InMemoryVectorStore.from_documents(filled, QRAGEmbeddings(model))
        out["langchain_filled"] = QRAGRetriever.from_store(store, model=model, k=k, **fields)
    return out


def compare_paths(
    docs: list[Document],
    questions: list[str],
    k: int,
    framework_filled: bool = False,
    **fields: Any,
) -> dict[str, Any]:
    """Each path's share of questions with the in-memory search's picks, and its hit list."""
    picks = {}
    retrievers = path_retrievers(k, docs if framework_filled else None, **fields)
    for name, retriever in retrievers.items():
        start = time.perf_counter()
        if name != "langchain_filled":  # filled already, the LangChain way
            retriever.add_documents(docs)
        picks[name] = [[h.chunk.id for h in hits] for hits in retriever.search(questions, k=k)]
        print(f"path {name}: {time.perf_counter() - start:.0f} s", flush=True)
    base = picks["memory"]
    return {
        name: {"same_picks_vs_memory": sum(a == b for a, b in zip(run, base)) / len(base)}
        for name, run in picks.items()
    } | {"picks": picks}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, default=300)
    p.add_argument("--orders", type=int, default=3, help="orders of arrival, file order first")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--seed", type=int, default=555564, help="question sample and orders")
    p.add_argument("--ways", default="own,articles", help="orders of arrival ('' for none)")
    p.add_argument("--paths", action="store_true", help="also compare search paths")
    p.add_argument("--framework-filled", action="store_true", help="--paths: + LangChain-filled")
    p.add_argument("--rules-off", action="store_true", help="--paths: no BM25, no supersede")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    set_threads(args.threads)
    docs, sample = corpus(args.seed, args.questions)
    questions, support = [q for q, _ in sample], [s for _, s in sample]
    out: dict[str, Any] = {**provenance(argv, args.threads), "split": "validation", "ways": {}}
    for way in filter(None, args.ways.split(",")):
        rng = random.Random(args.seed)
        runs = []
        for i in range(args.orders):
            order = docs if i == 0 else arrival(docs, way, rng)
            start = time.perf_counter()
            runs.append(picks(order, way, questions, args.k))
            print(f"{way} order {i}: {time.perf_counter() - start:.0f} s", flush=True)
        base = runs[0]
        same = [sum(a == b for a, b in zip(run, base)) / len(base) for run in runs[1:]]
        hits = [sum(s in r for s, r in zip(support, run)) / len(run) for run in runs]
        out["ways"][way] = {"same_picks_vs_file_order": same, f"hit@{args.k}": hits}
        print(
            f"{way}: same {args.k} picks as file order "
            + " / ".join(f"{x:.3f}" for x in same)
            + f"; hit@{args.k} "
            + " / ".join(f"{x:.3f}" for x in hits),
            flush=True,
        )
    if args.paths:
        rules = {"lexical_depth": 0, "supersede": False} if args.rules_off else {}
        paths = compare_paths(docs, questions, args.k, args.framework_filled, **rules)
        out["path_fields"] = rules
        out["paths"] = {name: v for name, v in paths.items() if name != "picks"}
        hits = {
            name: sum(s in r for s, r in zip(support, run)) / len(run)
            for name, run in paths["picks"].items()
        }
        for name, v in out["paths"].items():
            v[f"hit@{args.k}"] = hits[name]
            print(
                f"path {name}: same picks as memory {v['same_picks_vs_memory']:.3f}; "
                f"hit@{args.k} {hits[name]:.3f}",
                flush=True,
            )
    out.update(
        {"questions": args.questions, "paragraphs": len(docs), "articles": ARTICLES, "k": args.k}
    )
    if args.out:
        write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
