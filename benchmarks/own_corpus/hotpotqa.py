"""The own-corpus path on a second corpus, exactly as a user runs it: HotpotQA questions in the
custom JSONL format with ``documents``, one command ``qrag-train preset=custom_cpu
env.path=...`` (held out by document, checkpoint chosen on the validation slice, the report on
the held-out bucket at the end of the run), then the run's own ``report.json``.

Data: HotpotQA dev (distractor) questions of our ``train`` hash split (buckets 1-4 minus the
validation slice; bucket 0 and the validation slice, which steer and report the shipped
checkpoints, are never read), ``--questions`` in file order. Each paragraph is a document
(``id`` = ``title`` = its Wikipedia title, ``text`` = ``"<title>: <sentences>"`` as in
the HotpotQA loader); ``support_text`` = the
supporting-fact sentences (``--skip N`` starts after the first N: a second sample whose held-out
side no earlier run has read). The custom split then groups lines that share a paragraph title
(``group_by=auto``), so no paragraph is on both sides. Nothing trained here is shipped.

This corpus is confirmation, not steering: the preset's settings were chosen on SQuAD
validation articles before this ran.

    python -m benchmarks.own_corpus.hotpotqa --threads 2 --work runs/own_corpus_hotpotqa
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from qrag_training.data.hotpotqa import default_path, paragraph_text
from qrag_training.data.splits import TRAIN, filter_split

from benchmarks.harness import results as harness
from benchmarks.own_corpus.report_all import held_out_report
from benchmarks.own_corpus.training import run_training
from qrag_integrations.core.atomic import write_text_atomic

RESULTS = Path(__file__).resolve().parent / "results"
#: Characters per chunk: whole HotpotQA paragraphs (the longest in the file are ~2,400).
CHUNK_SIZE = 4000


def custom_line(record: dict) -> str:
    """One HotpotQA record as a custom JSONL line with documents and supporting sentences."""
    paragraphs = {title: sentences for title, sentences in record["context"]}
    support = []
    for title, i in record["supporting_facts"]:
        sentences = paragraphs.get(title, [])
        if 0 <= i < len(sentences) and sentences[i].strip():
            support.append(sentences[i].strip())
    return json.dumps(
        {
            "id": record["_id"],
            "question": record["question"],
            "answer": record["answer"],
            "documents": [
                {"id": title, "title": title, "text": paragraph_text(title, sentences)}
                for title, sentences in record["context"]
            ],
            "support_text": support,
            "meta": {"type": record.get("type")},
        },
        ensure_ascii=False,
    )


def write_jsonl(path: Path, questions: int, skip: int = 0) -> int:
    """``questions`` records of HotpotQA's ``train`` split after its first ``skip``, as custom
    JSONL."""
    with default_path().open(encoding="utf-8") as fh:
        records = json.load(fh)
    kept = filter_split(records, TRAIN, lambda r: str(r["_id"]), skip + questions)[skip:]
    kept = [r for r in kept if r["supporting_facts"]]
    write_text_atomic(path, "\n".join(custom_line(r) for r in kept) + "\n")
    return len(kept)


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, default=Path("runs/own_corpus_hotpotqa"))
    p.add_argument("--questions", type=int, default=3000, help="lines of the custom file")
    p.add_argument(
        "--skip",
        type=int,
        default=0,
        help="skip this many questions of the split first (a fresh sample: a new held-out side)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--minutes", type=float, help="time budget of the training (preset: 45)")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--out", type=Path, default=RESULTS / "hotpotqa_from_default.json")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="no training: add the report on every held-out question of the run in --work to --out",
    )
    args = p.parse_args(argv)
    if args.report_only:
        result = json.loads(args.out.read_text())
        report = held_out_report(
            args.work / "run",
            args.work / "hotpotqa_custom.jsonl",
            args.threads,
            [f"env.chunk_size={CHUNK_SIZE}", "env.splitter=sentences"],
        )
        result["held_out_report"] = report.to_dict()
        result["held_out_report_command"] = harness.command_line(
            list(argv) if argv is not None else None
        )
        harness.write_json(args.out, result)
        write_text_atomic(args.out.with_suffix(".md"), report.markdown() + "\n")
        print(report.markdown(), flush=True)
        return result
    harness.set_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    data = args.work / "hotpotqa_custom.jsonl"
    lines = write_jsonl(data, args.questions, args.skip)
    print(f"questions: {lines}", flush=True)
    run_dir = args.work / "run"
    train = [
        "preset=custom_cpu",
        f"env.path={data}",
        f"env.chunk_size={CHUNK_SIZE}",
        "env.splitter=sentences",
        f"torch_threads={args.threads}",
        f"out_dir={run_dir}",
        "overwrite=true",
        *([f"time_budget_minutes={args.minutes}"] if args.minutes else []),
        *args.overrides,
    ]
    training = run_training(train, run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    result = {
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "lines": lines,
        **training,
        "report": report,
    }
    harness.write_json(args.out, result)
    write_text_atomic(args.out.with_suffix(".md"), (run_dir / "report.md").read_text())
    return result


if __name__ == "__main__":
    main()
