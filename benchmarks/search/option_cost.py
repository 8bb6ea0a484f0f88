"""What a search option costs: the default model's k-step search of one question with the option
on and off, side by side (order alternating per query), over the synthetic corpus of
``search/run.py`` (real Shakespeare texts, random embeddings at real norms) laid out as one
document or as documents of 50 chunks. Reported per layout: the median milliseconds of each side,
their ratio, and how many picks differ.

- ``--option supersede`` (``SearchPolicy.of(config, supersede=True)`` against ``False``): each step's one
  exact scan keeps Q's 32 best (``supersede.pools``), its pick and the chunks the rule may take
  instead (before commit c0ff1b9, 2026-11-27, each pick sharing a term with the state paid one
  more exact scan; the queries are corpus lines, so most picks share terms).
- ``--option lexical_gap`` (``SearchPolicy.of(config, lexical_gap=GAP)`` against ``0``): later steps where
  Q's two best lie within the gap fuse BM25 of the question terms no pick names (BM25 scores of
  the question and of those terms, and the head of the question's ranking among the chunks that
  name one).
- ``--option lexical_weight`` (``lexical_weight=0.3, lexical_depth=20`` against ``lexical_weight=0,
  lexical_depth=10``): the fused first step ranks Q's 20 best by Q plus weighted BM25 score
  instead of fusing Q's 10 best with BM25's by rank.

    python -m benchmarks.search.option_cost --sizes 100000,400000 --queries 20
    python -m benchmarks.search.option_cost --option lexical_gap --sizes 100000,400000 --queries 20
    python -m benchmarks.search.option_cost --option position_mode --batches 1,16 --queries 32
    python -m benchmarks.search.option_cost --option lexical_weight --sizes 100000,400000 --queries 20

- ``--option position_mode`` (the model's ``position_mode`` ``document_relative`` against
  ``document``): documents holding picks are re-laid out each step, and a batch no longer shares
  one scan after the first step (positions depend on each question's picks). ``--batches``: also
  search that many questions a call (the time reported is per question).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import time

import torch

from benchmarks.harness import results as harness
from benchmarks.harness.texts import shakespeare_sentences
from benchmarks.search.corpus import make_embeddings, make_texts, measure_real_norms
from qrag_integrations import load_model
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.search import MultiStepSearcher

DOC_CHUNKS = 50  # chunks per document in the "many documents" layout


#: Each option's settings when on and when off.
OPTIONS = {
    "supersede": lambda gap: ({"supersede": True}, {"supersede": False}),
    "lexical_gap": lambda gap: ({"lexical_gap": gap}, {"lexical_gap": 0}),
    "lexical_weight": lambda gap: (
        {"lexical_weight": 0.3, "lexical_depth": 20},
        {"lexical_weight": 0.0, "lexical_depth": 10},
    ),
    "position_mode": lambda gap: (
        {"position_mode": "document_relative"},
        {"position_mode": "document"},
    ),
}

#: Options that are the model's configuration (``QRAGConfig``), not the search policy's changes.
MODEL_FIELDS = {f.name for f in dataclasses.fields(QRAGConfig)}


def searcher_with(model, index: ChunkIndex, changes: dict) -> MultiStepSearcher:
    """A searcher with ``changes``: model configuration fields on a shallow copy of the model
    (the weights shared), the rest as changes of its search policy (``SearchPolicy.of``)."""
    config = {k: v for k, v in changes.items() if k in MODEL_FIELDS}
    if config:
        model = copy.copy(model)
        model.config = dataclasses.replace(model.config, **config)
    rest = {k: v for k, v in changes.items() if k not in MODEL_FIELDS}
    return MultiStepSearcher(model, index, policy=SearchPolicy.of(model.config, **rest))


def measure(
    model,
    index: ChunkIndex,
    queries: list[str],
    k: int,
    settings: tuple[dict, dict],
    batch: int = 1,
) -> dict:
    """Median milliseconds per question of each side, searching ``batch`` questions a call."""
    on = searcher_with(model, index, settings[0])
    off = searcher_with(model, index, settings[1])
    on.search(queries[:1], k=k)  # builds the layout, BM25 and rotated copy once for both
    off.search(queries[:1], k=k)
    times = {"on": [], "off": []}
    replaced = 0
    calls = [queries[i : i + batch] for i in range(0, len(queries), batch)]
    for i, group in enumerate(calls):
        hits = {}
        for side in ("on", "off") if i % 2 == 0 else ("off", "on"):
            searcher = on if side == "on" else off
            start = time.perf_counter()
            hits[side] = searcher.search(group, k=k)
            times[side].append((time.perf_counter() - start) * 1000 / len(group))
        for a_hits, b_hits in zip(hits["on"], hits["off"]):
            replaced += sum(a.chunk.id != b.chunk.id for a, b in zip(a_hits, b_hits))
    on_ms, off_ms = statistics.median(times["on"]), statistics.median(times["off"])
    return {
        "batch": batch,
        "ms_on": round(on_ms, 2),
        "ms_off": round(off_ms, 2),
        "ratio": round(on_ms / off_ms, 3),
        "picks_differing": replaced,
        "picks": k * len(queries),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", default="packaged:qrag-general-minilm")
    p.add_argument("--option", choices=sorted(OPTIONS), default="supersede")
    p.add_argument("--gap", type=float, default=0.03, help="lexical_gap when on")
    p.add_argument("--sizes", default="100000,400000")
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--batches",
        default="1",
        help="questions per search call, comma-separated (ms per question)",
    )
    p.add_argument("--out", default=None, help="default: results/OPTION_cost.json")
    args = p.parse_args(argv)
    harness.set_threads(args.threads)
    model = load_model(args.checkpoint).eval()
    lines = shakespeare_sentences(5000, seed=0)
    with torch.inference_mode():
        norms = measure_real_norms(model, lines)
    queries = lines[1000 : 1000 + args.queries]
    settings = OPTIONS[args.option](args.gap)
    out = {
        "benchmark": "option_cost",
        "option": args.option,
        "settings_on_off": settings,
        "checkpoint": args.checkpoint,
        "k": args.k,
        "queries": args.queries,
        "results": [],
    }
    for n in (int(s) for s in args.sizes.split(",")):
        texts = make_texts(n, lines)
        emb = make_embeddings(n, model.embedding_dim, norms, seed=0)
        for layout in ("one document", f"documents of {DOC_CHUNKS}"):
            index = ChunkIndex(model.embedding_dim)
            docs = (
                ["d"] * n if layout == "one document" else [f"d{i // DOC_CHUNKS}" for i in range(n)]
            )
            index.add(texts, emb, doc_ids=docs)
            for batch in (int(b) for b in args.batches.split(",")):
                got = measure(model, index, queries, args.k, settings, batch)
                row = {"n": n, "layout": layout, **got}
                print(row, flush=True)
                out["results"].append(row)
            del index
    out |= harness.provenance(argv, args.threads)
    path = args.out or f"benchmarks/search/results/{args.option}_cost.json"
    harness.write_json(path, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
