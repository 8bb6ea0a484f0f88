"""Evaluate a Q-RAG checkpoint or a baseline retriever on held-out episodes (``qrag-eval``).

Retrievers:

* a checkpoint folder: greedy multi-step Q-RAG retrieval with the retriever's own search
  (``MultiStepSearcher``; each episode's chunks form its own index);
* ``--baseline base``: the same loop with an untrained model (both encoders = the base encoder);
* ``--baseline dense``: single-step dense retrieval, top-``steps`` chunks by cosine between the
  question and chunk embeddings (mean pooling of the base encoder);
* ``--baseline bm25``: single-step BM25 top-``steps`` (``bm25s``);
* ``--baseline none``: no retrieval (with ``--reader``: the reader sees the question only).

Data comes from the training config tree (``conf/env/*.yaml``, held-out side): ``--env babilong
--set env.task=qa1 --set env.eval_target_tokens=16000``, ``--env hotpotqa``, ``--env ruler``,
``--jsonl my.jsonl`` (custom format). Writes ``samples.jsonl`` (question, picked ids, support,
em, f1, and the Q-value of every pick as ``q_values``, or ``scores`` for the dense / BM25
baselines) and ``summary.json`` (fact_em, fact_f1, mean_steps, n, reward, ...) to ``--out``.

Metrics: fact EM = every supporting chunk was picked; fact F1 = F1 of picked vs supporting
chunk ids (both over the episodes with supporting facts).

Answers (``--reader SPEC``, built by ``qrag_integrations.llm.factory.build_reader``, e.g.
``local``, ``openai:BASE_URL#MODEL``): the reader answers every episode from its retrieved chunks
(``--answer-chunks all|first:N|q>=T``: every pick, the first N, or the picks whose Q-value is at
least T), given in retrieval order (pick order, or rank order for dense / BM25; ``--reader-order
document`` sorts them by document position) with the reader prompt
(``qrag_integrations.llm.DEFAULT_TEMPLATE`` or ``--reader-template``). The prompts of all
episodes go to the reader in batches of ``--reader-batch``. ``samples.jsonl`` gets each answer,
the gold answer, its answer EM / F1 and the chunk ids the reader saw; ``summary.json`` gets
answer_em / answer_f1 (means over the episodes with a gold answer, SQuAD normalisation: the
HotpotQA metrics) and for bAbI data answer_label (BabiLong's label match: the answer's first
sentence names the gold label and no other). With a reader, episodes
without supporting facts are kept (answer-only corpora) and episodes without an answer dropped.
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

from hydra.errors import ConfigCompositionException

from qrag_integrations.core.atomic import write_json_atomic, write_text_atomic
from qrag_integrations.cli_errors import INPUT_ERRORS, one_line_errors
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel, eval_mode
from qrag_integrations.llm import DEFAULT_TEMPLATE, Reader, ReaderError
from qrag_integrations.core.search import MultiStepSearcher
from qrag_training.answering import (
    CHUNK_ORDERS,
    ChunkSelection,
    answer_summary,
    chunk_selection_arg,
    episode_prompt,
    generate_answers,
    load_reader,
    ordered,
    reader_options,
)
from qrag_training.data.episode import Episode
from qrag_training.feedback import Feedback, RewardQuery, score_picks

#: Bad input at the trainer's command lines: a config that does not compose, and what any command
#: of the package refuses (:data:`qrag_integrations.cli_errors.INPUT_ERRORS`).
CLI_INPUT_ERRORS = (ConfigCompositionException, *INPUT_ERRORS)

logger = logging.getLogger(__name__)

BASELINES = ("base", "dense", "bm25", "none")
#: Baselines whose scores are not Q-values (a ``q>=T`` chunk selection is refused for them).
NOT_Q_VALUES = ("dense", "bm25", "none")
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
    """Mean fact EM / F1 (over the episodes with supporting facts), fact EM of the first picks only
    (as many as the episode has facts: ``fact_em_at_facts``), mean number of picks and
    (with a feedback) mean episode reward, all rewards asked in one batch
    (:func:`~qrag_training.feedback.score_picks`)."""
    labeled = [(e, r) for e, r in zip(episodes, results) if e.support]
    facts = [fact_metrics(r.picked, e.support) for e, r in labeled]
    out = {
        "fact_em": float(np.mean([em for em, _ in facts])) if facts else 0.0,
        "fact_f1": float(np.mean([f1 for _, f1 in facts])) if facts else 0.0,
        # precision of the first picks: EM when only as many picks count as there are facts
        "fact_em_at_facts": (
            float(np.mean([fact_metrics(r.picked[: len(e.support)], e.support)[0] for e, r in labeled]))
            if labeled
            else 0.0
        ),
        "mean_steps": float(np.mean([len(r.picked) for r in results])) if results else 0.0,
        "n": len(results),
    }
    if len(labeled) < len(results):
        out["n_fact"] = len(labeled)
    if feedback is not None:
        queries, owner = [], []
        for i, (episode, result) in enumerate(zip(episodes, results)):
            for k in range(1, len(result.picked) + 1):
                queries.append(RewardQuery(episode, tuple(result.picked[:k]), final=k == len(result.picked)))
                owner.append(i)
        rewards = np.zeros(len(results))
        np.add.at(rewards, np.asarray(owner, dtype=np.int64), np.asarray(score_picks(feedback, queries)))
        out["reward"] = float(rewards.mean()) if len(results) else 0.0
    return out


def answer_episodes(
    reader: Reader,
    episodes: Sequence[Episode],
    results: Sequence[Retrieval],
    selection: ChunkSelection,
    template: str,
    order: str = "retrieval",
    batch_size: int | None = None,
) -> tuple[list[list[int]], list[str]]:
    """The reader's answer for every episode from its chosen retrieved chunks.

    Args:
        reader: answers a batch of prompts.
        episodes: the episodes.
        results: what the retriever returned for each.
        selection: which picks the reader sees (all, the first N, Q-value >= T).
        template: prompt template with ``{context}`` and ``{question}``.
        order: ``retrieval`` (pick / rank order) or ``document`` order in the prompt.
        batch_size: prompts per reader call (``None``: all in one call).

    Returns:
        The chunk ids given to the reader (prompt order) and its answer, per episode.
    """
    chosen = [ordered(selection.choose(r.picked, r.scores), order) for r in results]
    prompts = [episode_prompt(e, ids, template) for e, ids in zip(episodes, chosen)]
    return chosen, generate_answers(reader, prompts, batch_size)


# -- retrievers -----------------------------------------------------------------------------------
def _chunk_embedder(model: QRAGModel, batch_size: int) -> ChunkEmbedder:
    """The model's own chunk encoder, ``batch_size`` chunks per forward pass."""
    return lambda texts: model.embed_chunks(texts, batch_size=batch_size)


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
    embed = embed or _chunk_embedder(model, embed_batch_size)
    results: list[Retrieval] = []
    with eval_mode(model):
        for start in range(0, len(episodes), batch_size):
            batch = list(episodes[start : start + batch_size])
            sizes = [len(e.chunks) for e in batch]
            chunk_emb = embed([c for e in batch for c in e.chunks]).split(sizes)
            indexes = []
            for episode, emb in zip(batch, chunk_emb):
                index = ChunkIndex(model.embedding_dim, device=model.device)
                index.add(episode.chunks, emb, ids=[str(i) for i in range(len(episode.chunks))])
                indexes.append(index)
            searcher = MultiStepSearcher(model, indexes[0])
            hits = searcher.search_each([e.question for e in batch], indexes, steps, stop_threshold)
            results += [Retrieval([int(h.chunk.id) for h in row], [h.q_value for h in row]) for row in hits]
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
    embed = embed or _chunk_embedder(model, embed_batch_size)
    results = []
    with eval_mode(model):
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
    r = p.add_argument_group("answers (a reader LLM answers from the retrieved chunks)")
    r.add_argument("--reader", help="reader spec: local, local:PATH, openai:BASE_URL#MODEL, vllm:MODEL")
    r.add_argument("--reader-option", dest="reader_options", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument of the reader (value read as JSON, else a string; repeatable)")
    r.add_argument("--answer-chunks", default="all", type=chunk_selection_arg,
                   help="chunks the reader sees: all, first:N (first N picks) or q>=T (picks with Q-value >= T)")
    r.add_argument("--reader-order", choices=CHUNK_ORDERS, default="retrieval",
                   help="chunk order in the prompt: retrieval (pick / rank order) or document")
    r.add_argument("--reader-template",
                   help="file with the prompt template ({context}, {question}); default: the readers' DEFAULT_TEMPLATE")
    r.add_argument("--reader-batch", type=int, default=16, help="prompts per reader call")
    return p


def retrieve(
    args: argparse.Namespace, cfg: Any, episodes: Sequence[Episode], steps: int
) -> tuple[str, list[Retrieval]]:
    """Run the retriever the arguments name; returns its name and one result per episode."""
    from qrag_integrations.core.loading import load_model
    from qrag_training.settings import model_config_from

    if args.baseline == "none":
        return "none", [Retrieval([]) for _ in episodes]
    if args.baseline == "bm25":
        return "bm25", bm25_retrieve(episodes, steps)
    if args.baseline in ("base", "dense"):
        model = QRAGModel.from_base(model_config_from(cfg), device=args.device).eval()
        name = f"{args.baseline}:{cfg.model.base_model}"
        if args.baseline == "dense":
            return name, dense_retrieve(model, episodes, steps)
        return name, greedy_retrieve(model, episodes, steps, args.batch_size, args.stop_threshold)
    model = load_model(args.checkpoint, device=args.device)
    return str(args.checkpoint), greedy_retrieve(model, episodes, steps, args.batch_size, args.stop_threshold)


def _reader_settings(args: argparse.Namespace) -> tuple[Reader, str]:
    """The reader and prompt template of the arguments (errors before any retrieval runs)."""
    if args.answer_chunks.min_score is not None and args.baseline in NOT_Q_VALUES:
        raise ValueError(f"--answer-chunks {args.answer_chunks} needs Q-values; --baseline {args.baseline} has none")
    template = Path(args.reader_template).read_text(encoding="utf-8") if args.reader_template else DEFAULT_TEMPLATE
    return load_reader(args.reader, reader_options(args.reader_options)), template


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate as the parsed arguments say; returns the summary."""
    from qrag_training.settings import feedback_from, load_episodes, run_config_from, to_container

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.baseline == "none" and not args.reader:
        raise ValueError("--baseline none retrieves nothing: it needs --reader")
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
    reader, template = _reader_settings(args) if args.reader else (None, "")
    reading = reader is not None
    episodes = load_episodes(cfg, run_config, "eval", needs_support=not reading, needs_answer=reading)
    steps = int(args.steps or run_config.max_steps)
    feedback = feedback_from(cfg)

    started = time.perf_counter()
    name, results = retrieve(args, cfg, episodes, steps)
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
    chosen: list[list[int]] = []
    answers: list[str] = []
    if reader is not None:
        started = time.perf_counter()
        chosen, answers = answer_episodes(
            reader, episodes, results, args.answer_chunks, template, args.reader_order, args.reader_batch
        )
        summary.update(answer_summary(episodes, answers, label_match=_label_match(cfg)))
        summary.update(
            {
                "reader": getattr(reader, "name", type(reader).__name__),
                "answer_chunks": str(args.answer_chunks),
                "reader_order": args.reader_order,
                "mean_reader_chunks": float(np.mean([len(c) for c in chosen])) if chosen else 0.0,
                "reader_seconds": round(time.perf_counter() - started, 2),
            }
        )
    if args.out:
        write_samples(Path(args.out), episodes, results, args.baseline in NOT_Q_VALUES, chosen, answers,
                      _label_match(cfg))
        write_json_atomic(Path(args.out) / "summary.json", summary)
    return summary


def _label_match(cfg: Any) -> bool:
    """BabiLong's label match is reported for bAbI data."""
    return str(cfg.env.name) == "babilong"


def write_samples(
    out: Path,
    episodes: Sequence[Episode],
    results: Sequence[Retrieval],
    plain_scores: bool,
    chosen: Sequence[Sequence[int]] = (),
    answers: Sequence[str] = (),
    label_match: bool = False,
) -> None:
    """``out/samples.jsonl``: one line per episode (picks, fact EM / F1, scores; with answers: the
    answer, the gold answer, answer EM / F1 (and label match) and the chunk ids the reader saw)."""
    score_key = "scores" if plain_scores else "q_values"
    lines = []
    for i, (episode, result) in enumerate(zip(episodes, results)):
        em, f1 = fact_metrics(result.picked, episode.support)
        row: dict[str, Any] = {
            "id": episode.id,
            "question": episode.question,
            "picked": result.picked,
            "support": list(episode.support),
            "em": em,
            "f1": f1,
            score_key: result.scores,
        }
        if answers:
            row.update({"reader_chunks": list(chosen[i]), "answer": answers[i], "gold_answer": episode.answer})
            if episode.answer is not None:
                row.update(answer_summary([episode], answers[i : i + 1], label_match))
                row.pop("n_answers")
        lines.append(json.dumps(row, ensure_ascii=False))
    write_text_atomic(out / "samples.jsonl", "\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``qrag-eval``."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    with one_line_errors("qrag-eval", CLI_INPUT_ERRORS):
        try:
            summary = run(args)
        except ReaderError as err:  # not bad input: the reader (a server, a model) failed
            raise SystemExit(f"qrag-eval: the reader failed: {err}") from err
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
