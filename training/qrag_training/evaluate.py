"""Evaluate a Q-RAG checkpoint or a baseline retriever on held-out episodes (``qrag-eval``).

Retrievers:

* a checkpoint folder: greedy multi-step Q-RAG retrieval with the retriever's own search
  (``MultiStepSearcher``; each episode's chunks form its own index);
* ``--baseline base``: the same loop with an untrained model (both encoders = the base encoder);
* ``--baseline dense``: single-step dense retrieval, top-``steps`` chunks by cosine between the
  question and chunk embeddings (mean pooling of the base encoder);
* ``--baseline bm25``: single-step BM25 top-``steps`` (``bm25s``);
* ``--baseline hybrid``: dense and BM25 fused by reciprocal rank (LangChain's ``EnsembleRetriever``);
* ``--baseline none``: no retrieval (with ``--reader``: the reader sees the question only).

Data comes from the training config tree (``conf/env/*.yaml``, held-out side): ``--env babilong
--set env.task=qa1 --set env.eval_target_tokens=16000``, ``--env hotpotqa``, ``--env ruler``,
``--jsonl my.jsonl`` (custom format). Writes ``samples.jsonl`` (question, picked ids, support,
em, f1, and the Q-value of every pick as ``q_values``, or ``scores`` for the dense / BM25
baselines) and ``summary.json`` (fact_em, fact_f1, mean_steps, n, reward, ...) to ``--out``.
``--backend onnx|openvino`` / ``--quantize bf16|int8`` encode with a faster inference backend
(``QRAGModel.set_backend``; the checkpoint's, base's or dense's encoders, not the
``--compare-baselines`` report's).

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
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hydra.errors import ConfigCompositionException

from qrag_integrations.cli_backend import (
    add_backend_arguments,
    add_threads_argument,
    apply_backend,
    apply_threads,
)
from qrag_integrations.cli_errors import INPUT_ERRORS, one_line_errors
from qrag_integrations.core.atomic import write_json_atomic, write_text_atomic
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.llm import DEFAULT_TEMPLATE, Reader, ReaderError
from qrag_training.answering import (
    CHUNK_ORDERS,
    answer_episodes,
    answer_summary,
    chunk_selection_arg,
    load_reader,
    reader_options,
)
from qrag_training.baselines import (
    BASELINES,
    NOT_Q_VALUES,
    bm25_retrieve,
    dense_retrieve,
    greedy_retrieve,
    hybrid_retrieve,
)
from qrag_training.data.episode import Episode
from qrag_training.metrics import Retrieval, fact_metrics, summarize
from qrag_training.report import RECORDED, checkpoint_report

#: Bad input at the trainer's command lines: a config that does not compose, and what any command
#: of the package refuses (:data:`qrag_integrations.cli_errors.INPUT_ERRORS`).
CLI_INPUT_ERRORS = (ConfigCompositionException, *INPUT_ERRORS)

logger = logging.getLogger(__name__)

#: The Hydra config tree shared with ``qrag-train``.
CONF_DIR = Path(__file__).resolve().parent / "conf"


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
    who.add_argument(
        "checkpoint", nargs="?", help="Q-RAG checkpoint folder (out_dir/best, out_dir/last)"
    )
    who.add_argument(
        "--baseline", choices=BASELINES, help="evaluate a baseline instead of a checkpoint"
    )
    p.add_argument(
        "--env",
        default="babilong",
        help="data set config in conf/env/ (babilong, ruler, hotpotqa, musique, twowiki, custom)",
    )
    p.add_argument("--jsonl", help="custom-format JSONL file (implies --env custom)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Hydra override of the config tree, e.g. env.task=qa1 or env.eval_target_tokens=16000 (repeatable)",
    )
    p.add_argument(
        "--n", type=int, help="number of held-out episodes (default: eval_episodes of the config)"
    )
    p.add_argument(
        "--seed",
        type=int,
        help="seed of generated held-out episodes (default: eval_seed of the config)",
    )
    p.add_argument("--steps", type=int, help="picks per episode (default: env.max_steps)")
    p.add_argument(
        "--stop-threshold",
        type=float,
        help="stop before a pick whose Q-value is below this (as QRAGRetriever's stop_threshold)",
    )
    p.add_argument(
        "--base-model",
        help="base encoder of the base/dense/hybrid baselines (default: the config's model.base_model)",
    )
    p.add_argument(
        "--compare-baselines",
        action="store_true",
        help="with a checkpoint: also run its starting model, its base encoder multi-step, dense "
        "top-k, BM25 and dense+BM25 on the same episodes; print the paired table and a verdict "
        "against the best of them (report.json / report.md in --out)",
    )
    p.add_argument(
        "--start",
        help="with --compare-baselines: the starting model the checkpoint must beat (a folder or "
        "packaged name; none: no starting model); default: the init_from its run recorded",
    )
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, ...)")
    add_backend_arguments(p)  # of the checkpoint's, base's or dense's encoders
    p.add_argument("--batch-size", type=int, default=16, help="episodes retrieved together")
    add_threads_argument(p)
    p.add_argument("--out", help="output folder for samples.jsonl and summary.json")
    r = p.add_argument_group("answers (a reader LLM answers from the retrieved chunks)")
    r.add_argument(
        "--reader", help="reader spec: local, local:PATH, openai:BASE_URL#MODEL, vllm:MODEL"
    )
    r.add_argument(
        "--reader-option",
        dest="reader_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of the reader (value read as JSON, else a string; repeatable)",
    )
    r.add_argument(
        "--answer-chunks",
        default="all",
        type=chunk_selection_arg,
        help="chunks the reader sees: all, first:N (first N picks) or q>=T (picks with Q-value >= T)",
    )
    r.add_argument(
        "--reader-order",
        choices=CHUNK_ORDERS,
        default="retrieval",
        help="chunk order in the prompt: retrieval (pick / rank order) or document",
    )
    r.add_argument(
        "--reader-template",
        help="file with the prompt template ({context}, {question}); default: the readers' DEFAULT_TEMPLATE",
    )
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
    if args.baseline in ("base", "dense", "hybrid"):
        model = QRAGModel.from_base(model_config_from(cfg), device=args.device).eval()
        apply_backend(model, args)
        name = f"{args.baseline}:{cfg.model.base_model}"
        if args.baseline == "dense":
            return name, dense_retrieve(model, episodes, steps)
        if args.baseline == "hybrid":
            return f"dense+bm25:{cfg.model.base_model}", hybrid_retrieve(model, episodes, steps)
        return name, greedy_retrieve(
            model, episodes, steps, args.batch_size, args.stop_threshold, threads=args.threads
        )
    model = apply_backend(load_model(args.checkpoint, device=args.device), args)
    return str(args.checkpoint), greedy_retrieve(
        model, episodes, steps, args.batch_size, args.stop_threshold, threads=args.threads
    )


def _backend(args: argparse.Namespace) -> dict[str, Any]:
    """The encoders' inference backend, for the summary."""
    return {"backend": args.backend, "quantize": args.quantize}


def _reader_settings(args: argparse.Namespace) -> tuple[Reader, str]:
    """The reader and prompt template of the arguments (errors before any retrieval runs)."""
    if args.answer_chunks.min_score is not None and args.baseline in NOT_Q_VALUES:
        raise ValueError(
            f"--answer-chunks {args.answer_chunks} needs Q-values; --baseline {args.baseline} has none"
        )
    template = (
        Path(args.reader_template).read_text(encoding="utf-8")
        if args.reader_template
        else DEFAULT_TEMPLATE
    )
    return load_reader(args.reader, reader_options(args.reader_options)), template


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate as the parsed arguments say; returns the summary."""
    from qrag_training.settings import feedback_from, load_episodes, run_config_from, to_container

    apply_threads(args)
    if args.baseline == "none" and not args.reader:
        raise ValueError("--baseline none retrieves nothing: it needs --reader")
    if args.compare_baselines and args.baseline:
        raise ValueError("--compare-baselines judges a checkpoint: give one instead of --baseline")
    if args.start is not None and not args.compare_baselines:
        raise ValueError("--start names the model --compare-baselines compares with: add that")
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
    episodes = load_episodes(
        cfg, run_config, "eval", needs_support=not reading, needs_answer=reading
    )
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
            **(_backend(args) if args.baseline not in ("bm25", "none") else {}),
            "seconds": round(elapsed, 2),
            "data": to_container(cfg.env.eval),
        }
    )
    chosen: list[list[int]] = []
    answers: list[str] = []
    if reader is not None:
        started = time.perf_counter()
        chosen, answers = answer_episodes(
            reader,
            episodes,
            results,
            args.answer_chunks,
            template,
            args.reader_order,
            args.reader_batch,
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
    if args.compare_baselines:
        start = RECORDED if args.start is None else (None if args.start == "none" else args.start)
        report = checkpoint_report(
            args.checkpoint, cfg, episodes, steps, args.batch_size, args.device, start
        )
        summary["baseline_report"] = report.to_dict()
        print(report.markdown(), file=sys.stderr)
        if args.out:
            write_json_atomic(Path(args.out) / "report.json", report.to_dict())
            write_text_atomic(Path(args.out) / "report.md", report.markdown() + "\n")
    if args.out:
        write_samples(
            Path(args.out),
            episodes,
            results,
            args.baseline in NOT_Q_VALUES,
            chosen,
            answers,
            _label_match(cfg),
        )
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
            row.update(
                {
                    "reader_chunks": list(chosen[i]),
                    "answer": answers[i],
                    "gold_answer": episode.answer,
                }
            )
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
