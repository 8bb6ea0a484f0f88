"""Evaluate a Q-RAG checkpoint or a baseline retriever on held-out episodes (``qrag-eval``).

Retrievers:

* a checkpoint folder: greedy multi-step Q-RAG retrieval with the retriever's own search
  (``MultiStepSearcher``; each episode's chunks form its own index);
* ``--baseline base``: the same loop with an untrained model (both encoders = the base encoder);
* ``--baseline dense``: single-step dense retrieval, top-``steps`` chunks by cosine between the
  question and chunk embeddings (mean pooling of the base encoder);
* ``--baseline bm25``: single-step BM25 top-``steps`` (``bm25s``).

Data comes from the training config tree (``conf/env/*.yaml``, held-out side): ``--env babilong
--set env.task=qa1 --set env.eval_target_tokens=16000``, ``--env hotpotqa``, ``--env ruler``,
``--jsonl my.jsonl`` (custom format). Writes ``samples.jsonl`` (question, picked ids, support,
em, f1, and the Q-value of every pick as ``q_values``, or ``scores`` for the dense / BM25
baselines) and ``summary.json`` (fact_em, fact_f1, mean_steps, n, reward, ...) to ``--out``.

Metrics: fact EM = every supporting chunk was picked; fact F1 = F1 of picked vs supporting
chunk ids.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qrag_integrations.atomic import write_json_atomic, write_text_atomic
from qrag_integrations.index import ChunkIndex
from qrag_integrations.model import QRAGModel
from qrag_integrations.search import MultiStepSearcher
from qrag_training.data.episode import Episode
from qrag_training.feedback import Feedback

logger = logging.getLogger(__name__)

BASELINES = ("base", "dense", "bm25")
#: Chunk texts -> ``(len(texts), D)`` chunk embeddings.
ChunkEmbedder = Callable[[Sequence[str]], torch.Tensor]
#: The Hydra config tree shared with ``qrag-train``.
CONF_DIR = Path(__file__).resolve().parent / "conf"


# -- metrics --------------------------------------------------------------------------------------
def fact_metrics(picked: Sequence[int], support: Sequence[int]) -> tuple[float, float]:
    """``(fact EM, fact F1)`` of picked chunk ids against supporting ids.

    EM is 1 when every supporting chunk was picked (extra picks allowed), F1 is the F1 of the two
    id sets (0 when nothing was picked or there is no support).
    """
    got, gold = {int(i) for i in picked}, {int(i) for i in support}
    if not gold:
        return 0.0, 0.0
    em = float(gold.issubset(got))
    hit = len(got & gold)
    if not got or not hit:
        return em, 0.0
    precision, recall = hit / len(got), hit / len(gold)
    return em, 2 * precision * recall / (precision + recall)


@dataclass
class Retrieval:
    """What a retriever returned for one episode."""

    picked: list[int]
    """Chunk ids in pick (or rank) order."""
    scores: list[float] = field(default_factory=list)
    """Score of each pick: Q-value (multi-step), cosine (dense) or BM25 score."""


def summarize(
    episodes: Sequence[Episode], results: Sequence[Retrieval], feedback: Feedback | None = None
) -> dict[str, float]:
    """Mean fact EM / F1, mean number of picks and (with a feedback) mean episode reward."""
    ems, f1s, rewards = [], [], []
    for episode, result in zip(episodes, results):
        em, f1 = fact_metrics(result.picked, episode.support)
        ems.append(em)
        f1s.append(f1)
        if feedback is not None:
            rewards.append(
                sum(
                    feedback.reward(episode, result.picked[:k], k, final=k == len(result.picked))
                    for k in range(1, len(result.picked) + 1)
                )
            )
    out = {
        "fact_em": float(np.mean(ems)) if ems else 0.0,
        "fact_f1": float(np.mean(f1s)) if f1s else 0.0,
        "mean_steps": float(np.mean([len(r.picked) for r in results])) if results else 0.0,
        "n": len(results),
    }
    if feedback is not None:
        out["reward"] = float(np.mean(rewards)) if rewards else 0.0
    return out


# -- retrievers -----------------------------------------------------------------------------------
@torch.inference_mode()
def greedy_retrieve(
    model: QRAGModel,
    episodes: Sequence[Episode],
    steps: int,
    batch_size: int = 16,
    stop_threshold: float | None = None,
    embed_batch_size: int = 128,
    embed: ChunkEmbedder | None = None,
) -> list[Retrieval]:
    """Greedy multi-step Q-RAG retrieval with the retriever's own search
    (:meth:`MultiStepSearcher.search_each`), ``batch_size`` episodes at a time.

    Args:
        model: the Q-RAG model (its config fixes positions and the state text).
        episodes: episodes to retrieve for; each one's chunks form its own index.
        steps: maximum picks per episode.
        batch_size: episodes whose states are embedded together.
        stop_threshold: if set, stop an episode before a pick whose Q-value is below it (as
            ``QRAGRetriever(stop_threshold=...)``; an episode can then pick nothing).
        embed_batch_size: chunks per forward pass when embedding.
        embed: chunk texts -> their embeddings with this model's chunk encoder, instead of
            ``model.embed_chunks`` (e.g. a benchmark's cache of pre-embedded noise sentences).
    """
    embed = embed or (lambda texts: model.embed_chunks(texts, batch_size=embed_batch_size))
    was_training = model.training
    model.eval()
    results: list[Retrieval] = []
    for start in range(0, len(episodes), batch_size):
        batch = list(episodes[start : start + batch_size])
        sizes = [len(e.chunks) for e in batch]
        flat = [c for e in batch for c in e.chunks]
        chunk_emb = embed(flat).split(sizes)
        indexes = []
        for episode, emb in zip(batch, chunk_emb):
            index = ChunkIndex(model.embedding_dim, device=model.device)
            index.add(episode.chunks, emb, ids=[str(i) for i in range(len(episode.chunks))])
            indexes.append(index)
        searcher = MultiStepSearcher(model, indexes[0])
        hits = searcher.search_each([e.question for e in batch], indexes, steps, stop_threshold)
        results += [Retrieval([int(h.chunk.id) for h in row], [h.q_value for h in row]) for row in hits]
    model.train(was_training)
    return results


@torch.inference_mode()
def dense_retrieve(
    model: QRAGModel,
    episodes: Sequence[Episode],
    k: int,
    embed_batch_size: int = 128,
    embed: ChunkEmbedder | None = None,
) -> list[Retrieval]:
    """Single-step dense top-``k`` by cosine of question vs chunk mean-pooled embeddings.

    The question goes through the state encoder and chunks through the chunk encoder (or
    ``embed``, as in :func:`greedy_retrieve`); for an untrained model both are the base encoder.
    """
    embed = embed or (lambda texts: model.embed_chunks(texts, batch_size=embed_batch_size))
    model.eval()
    results = []
    for episode in episodes:
        chunks = torch.nn.functional.normalize(embed(episode.chunks).float(), dim=-1)
        query = torch.nn.functional.normalize(model.embed_states([episode.question]).float(), dim=-1)
        scores = (query @ chunks.T)[0]
        top = torch.topk(scores, min(k, len(episode.chunks)))
        results.append(Retrieval(top.indices.tolist(), top.values.tolist()))
    return results


def bm25_retrieve(episodes: Sequence[Episode], k: int) -> list[Retrieval]:
    """Single-step BM25 top-``k`` over each episode's chunks (``bm25s``, English stop words)."""
    import bm25s

    results = []
    for episode in episodes:
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(episode.chunks, stopwords="en", show_progress=False), show_progress=False)
        query = bm25s.tokenize([episode.question], stopwords="en", return_ids=False, show_progress=False)
        docs, scores = retriever.retrieve(query, k=min(k, len(episode.chunks)), show_progress=False)
        results.append(Retrieval([int(i) for i in docs[0]], [float(s) for s in scores[0]]))
    return results


# -- CLI ------------------------------------------------------------------------------------------
def compose_config(env: str, overrides: Sequence[str] = ()) -> Any:
    """The training config tree with ``env`` chosen and Hydra ``overrides`` applied."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[f"env={env}", *overrides])


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``qrag-eval``."""
    p = argparse.ArgumentParser(
        prog="qrag-eval",
        description="Evaluate a Q-RAG checkpoint or a baseline retriever (fact EM / F1).",
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("checkpoint", nargs="?", help="Q-RAG checkpoint folder (out_dir/best, out_dir/last)")
    who.add_argument("--baseline", choices=BASELINES, help="evaluate a baseline instead of a checkpoint")
    p.add_argument("--env", default="babilong", help="data set config in conf/env/ (babilong, ruler, hotpotqa, musique, twowiki, custom)")
    p.add_argument("--jsonl", help="custom-format JSONL file (implies --env custom)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="Hydra override of the config tree, e.g. env.task=qa1 or env.eval_target_tokens=16000 (repeatable)")
    p.add_argument("--n", type=int, help="number of held-out episodes (default: eval_episodes of the config)")
    p.add_argument("--seed", type=int, help="seed of generated held-out episodes (default: eval_seed of the config)")
    p.add_argument("--steps", type=int, help="picks per episode (default: env.max_steps)")
    p.add_argument("--stop-threshold", type=float, help="stop before a pick whose Q-value is below this (as QRAGRetriever's stop_threshold)")
    p.add_argument("--base-model", help="base encoder of the base/dense baselines (default: the config's model.base_model)")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, ...)")
    p.add_argument("--batch-size", type=int, default=16, help="episodes retrieved together")
    p.add_argument("--threads", type=int, help="torch.set_num_threads")
    p.add_argument("--out", help="output folder for samples.jsonl and summary.json")
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate as the parsed arguments say; returns the summary."""
    from qrag_integrations.checkpoint import load_model
    from qrag_training.settings import (
        feedback_from,
        load_episodes,
        model_config_from,
        run_config_from,
        to_container,
    )

    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = list(args.overrides)
    env = args.env
    if args.jsonl:
        env = "custom"
        overrides.append(f"env.path={args.jsonl}")
    if args.n is not None:
        overrides.append(f"eval_episodes={args.n}")
    if args.seed is not None:
        overrides.append(f"eval_seed={args.seed}")
    if args.base_model:
        overrides.append(f"model.base_model={args.base_model}")
    cfg = compose_config(env, overrides)
    run_config = run_config_from(cfg)
    episodes = load_episodes(cfg, run_config, "eval", needs_support=True)
    steps = int(args.steps or run_config.max_steps)
    feedback = feedback_from(cfg)

    started = time.perf_counter()
    if args.baseline == "bm25":
        results = bm25_retrieve(episodes, steps)
        name = "bm25"
    elif args.baseline in ("base", "dense"):
        model = QRAGModel.from_base(model_config_from(cfg), device=args.device).eval()
        name = f"{args.baseline}:{cfg.model.base_model}"
        if args.baseline == "dense":
            results = dense_retrieve(model, episodes, steps)
        else:
            results = greedy_retrieve(model, episodes, steps, args.batch_size, args.stop_threshold)
    else:
        model = load_model(args.checkpoint, device=args.device)
        name = str(args.checkpoint)
        results = greedy_retrieve(model, episodes, steps, args.batch_size, args.stop_threshold)
    elapsed = time.perf_counter() - started

    summary: dict[str, Any] = summarize(episodes, results, feedback)
    summary.update(
        {
            "retriever": name,
            "env": str(cfg.env.name),
            "steps": steps,
            "stop_threshold": args.stop_threshold,
            "seconds": round(elapsed, 2),
            "data": to_container(cfg.env.eval),
        }
    )
    if args.out:
        out = Path(args.out)
        score_key = "scores" if args.baseline in ("dense", "bm25") else "q_values"
        lines = []
        for episode, result in zip(episodes, results):
            em, f1 = fact_metrics(result.picked, episode.support)
            lines.append(
                json.dumps(
                    {
                        "id": episode.id,
                        "question": episode.question,
                        "picked": result.picked,
                        "support": list(episode.support),
                        "em": em,
                        "f1": f1,
                        score_key: result.scores,
                    },
                    ensure_ascii=False,
                )
            )
        write_text_atomic(out / "samples.jsonl", "\n".join(lines) + "\n")
        write_json_atomic(out / "summary.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``qrag-eval``."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    summary = run(args)
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
