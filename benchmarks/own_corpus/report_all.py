"""A finished own-corpus run's checkpoint against the starting model and the baselines on every
held-out question of its file (the run's own report stops at ``report_episodes``, 300 in
``preset=custom_cpu``, to keep the run within its time budget).

    python -m benchmarks.own_corpus.report_all --run runs/mine --data my.jsonl --out report.json
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from qrag_training.report import BaselineReport, checkpoint_report

from benchmarks.harness import results as harness
from benchmarks.own_corpus.training import PICKS, custom_questions


def held_out_report(
    run_dir: Path, data: Path, threads: int, overrides: Sequence[str] = ()
) -> BaselineReport:
    """``run_dir/best`` against the baselines on every question of the held-out (report) side of
    ``data``, split as the run split it (``overrides``: the run's own ``env.*`` settings)."""
    cfg, episodes = custom_questions(data, "eval", *overrides)
    harness.set_threads(threads)
    return checkpoint_report(str(run_dir / "best"), cfg, episodes, PICKS, batch_size=32)


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, required=True, help="the run's out_dir")
    p.add_argument("--data", type=Path, required=True, help="the run's env.path")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--set", dest="overrides", action="append", default=[], help="the run's env.*")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    report = held_out_report(args.run, args.data, args.threads, args.overrides)
    result = {
        **harness.provenance(argv, args.threads),
        "run": str(args.run),
        "report": report.to_dict(),
    }
    harness.write_json(args.out, result)
    args.out.with_suffix(".md").write_text(report.markdown() + "\n", encoding="utf-8")
    print(report.markdown(), flush=True)
    return result


if __name__ == "__main__":
    main()
