"""The own-corpus path end to end: ``qrag-train preset=custom_cpu`` on real questions no run of
ours has trained on, then the held-out comparison with the baselines (issue "Your own corpus").

Data: SQuAD v2.0 dev in the custom JSONL format, one line per answerable question, ``chunks`` =
its article's paragraphs, ``support`` = its paragraph, ``meta.article`` = the article index (file
order). Articles 0-9 train, 10-11 choose the checkpoint (validation), 12-17 are held out for the
report (``--train`` / ``--val`` / ``--heldout A-B`` move them within 0-17); articles 18-34 are
reserved for an independent check and never read. Checkpoints trained here are never shipped and
never feed the default.

Steps: write the three files; run ``qrag-train preset=custom_cpu`` on them (wall time, updates,
updates per second from its ``metrics.jsonl``); compare ``best/`` with its base encoder used
multi-step, dense top-k and BM25 on the held-out questions (:mod:`qrag_training.report`, 3
picks: hit@1, hit@3, fact EM, paired intervals, verdict).

    python -m benchmarks.own_corpus.run --threads 2 --work runs/own_corpus
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

from qrag_training.data.squad import load_squad_ood
from qrag_training.report import checkpoint_report

from benchmarks.harness import results as harness
from benchmarks.harness.squad_articles import article_range
from benchmarks.own_corpus.training import PICKS, custom_questions, run_training
from qrag_integrations.core.atomic import write_text_atomic

RESULTS = Path(__file__).resolve().parent / "results"
#: Article ranges (file order, half-open): training, validation (checkpoint choice), held out.
SPLITS = {"train": (0, 10), "val": (10, 12), "heldout": (12, 18)}


def write_jsonl(path: Path, articles: tuple[int, int]) -> int:
    """SQuAD questions of ``articles`` as custom JSONL lines (one article per line's chunks)."""
    lines = []
    for e in load_squad_ood(articles=articles, group_size=1):
        title_free = [c.split(": ", 1)[1] if ": " in c else c for c in e.chunks]
        lines.append(
            json.dumps(
                {
                    "id": e.id,
                    "question": e.question,
                    "answer": e.answer,
                    "chunks": title_free,
                    "support": e.support,
                    "meta": {"article": e.meta["article"]},
                },
                ensure_ascii=False,
            )
        )
    write_text_atomic(path, "\n".join(lines) + "\n")
    return len(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, default=Path("runs/own_corpus"), help="data + run folder")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--minutes", type=float, help="time budget of the training (preset: 45)")
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], help="more qrag-train overrides"
    )
    for name, (a, b) in SPLITS.items():
        p.add_argument(
            f"--{name}",
            type=article_range,
            default=(a, b),
            metavar="A-B",
            help=f"articles of the {name} file, inclusive (default {a}-{b - 1})",
        )
    p.add_argument("--out", type=Path, default=RESULTS / "squad_custom_cpu.json")
    args = p.parse_args(argv)
    spans = sorted((getattr(args, name), name) for name in SPLITS)
    for ((_, end), first), ((start, _), second) in itertools.pairwise(spans):
        if start < end:
            p.error(f"--{first} and --{second} share articles: give ranges that do not overlap")
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    files = {name: args.work / f"squad_{name}.jsonl" for name in SPLITS}
    spans = {name: getattr(args, name) for name in SPLITS}
    counts = {name: write_jsonl(files[name], span) for name, span in spans.items()}
    print(f"questions: {counts}", flush=True)
    run_dir = args.work / "run"
    train = [
        "preset=custom_cpu",
        f"env.path={files['train']}",
        f"env.eval.path={files['val']}",
        "env.train_hash_split=null",
        "env.eval_hash_split=null",
        "final_report=false",  # the report below runs on the held-out file
        f"torch_threads={args.threads}",
        f"out_dir={run_dir}",
        "overwrite=true",
        *([f"time_budget_minutes={args.minutes}"] if args.minutes else []),
        *args.overrides,
    ]
    training = run_training(train, run_dir)
    cfg, held_out = custom_questions(files["heldout"], None)
    report = checkpoint_report(str(run_dir / "best"), cfg, held_out, PICKS, batch_size=32)
    (h0, h1), (t0, t1), (v0, v1) = spans["heldout"], spans["train"], spans["val"]
    where = (
        f"questions: SQuAD v2.0 dev articles {h0}-{h1 - 1} (held out; trained on "
        f"{t0}-{t1 - 1}, checkpoint chosen on {v0}-{v1 - 1})"
    )
    report.notes[:] = [where]
    print(report.markdown(), flush=True)
    result = {
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "questions": counts,
        **training,
        "report": report.to_dict(),
    }
    harness.write_json(args.out, result)
    write_text_atomic(args.out.with_suffix(".md"), report.markdown() + "\n")
    return result


if __name__ == "__main__":
    main()
