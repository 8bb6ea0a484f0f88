"""Question anchoring at search time for a checkpoint trained by ``preset=custom_cpu``: the
comparison with the baselines on the *validation* articles (SQuAD v2.0 dev 10-11, the file
``run.py`` writes), with the checkpoint's own ``question_weight`` (0) and with 3 (the untrained
default's), base encoder with the same setting. Validation only: it chose the preset's setting.

    python -m benchmarks.own_corpus.anchoring --work runs/own_corpus --threads 2
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Sequence
from pathlib import Path

from qrag_training.report import compare_with_baselines

from benchmarks.harness import results as harness
from benchmarks.own_corpus.training import custom_questions
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, default=Path("runs/own_corpus"), help="run.py's folder")
    p.add_argument("--weights", default="0,3", help="question_weight values compared")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=RESULTS / "anchoring_val.json")
    args = p.parse_args(argv)
    harness.set_threads(args.threads)
    _, episodes = custom_questions(args.work / "squad_val.jsonl", None)
    trained = load_model(str(args.work / "run" / "best")).eval()
    base = QRAGModel.from_base(trained.config).eval()
    reports = {}
    for w in [float(x) for x in args.weights.split(",") if x]:
        t, b = copy.deepcopy(trained), copy.deepcopy(base)
        t.config.question_weight = b.config.question_weight = w
        note = f"questions: SQuAD v2.0 dev articles 10-11 (validation), question_weight={w:g}"
        report = compare_with_baselines(t, b, episodes, 3, 32, notes=[note])
        print(report.markdown(), "\n", flush=True)
        reports[f"{w:g}"] = report.to_dict()
    result = {
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "checkpoint": str(args.work / "run" / "best"),
        "reports": reports,
    }
    harness.write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
