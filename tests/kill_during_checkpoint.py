"""Run ``qrag-train`` and SIGKILL it at the n-th file write of its saves of ``out_dir/<name>``.

    python tests/kill_during_checkpoint.py NAME N out_dir=... <more qrag-train overrides>

``NAME`` is ``last`` or ``best``; writes are counted as in ``faults.py``, removals included,
over all saves of ``out_dir/NAME`` in this run. With ``N = 0`` nothing is killed and a run that
ends prints, per checkpoint save, how many writes it made: ``checkpoint writes: best=8 last=12,14``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from faults import Faults, injected, kill_self
from qrag_training import train, trainer


def main() -> None:
    name, kill_at, overrides = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    out_dir = Path(next(a.split("=", 1)[1] for a in overrides if a.startswith("out_dir=")))
    counts: dict[str, list[int]] = {"best": [], "last": []}
    save = trainer.save_run_checkpoint

    watched = Faults(out_dir, fail_at=kill_at or None, action=kill_self, removals=True)

    def save_watched(path: Path, *args: Any, **kwargs: Any) -> None:
        plan = watched if path.name == name else Faults(out_dir, removals=True)
        before = len(plan.seen)
        with injected(plan):
            save(path, *args, **kwargs)
        counts[path.name].append(len(plan.seen) - before)

    trainer.save_run_checkpoint = save_watched
    sys.argv = [sys.argv[0], *overrides]
    try:
        train.main()
    finally:
        print(
            "checkpoint writes: "
            + " ".join(f"{k}={','.join(map(str, v))}" for k, v in counts.items())
        )


if __name__ == "__main__":
    main()
