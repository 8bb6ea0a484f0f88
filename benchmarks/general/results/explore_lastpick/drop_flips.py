"""qa2 / qa3 stories of babilong-mixed-4000 (validation, seed 555555) split by whether a gold
fact puts the object down (dropped / left / discarded / put down): em@facts of the shipped
default (``../explore_gate/product_val_default.json``) and of each model in
``lastpick_mixed_val.json``, with the stories each wins and loses against the default.

Run from the repository root: ``PYTHONPATH=training:. python
benchmarks/general/results/explore_lastpick/drop_flips.py``."""

import json
import re
import sys
from pathlib import Path

from benchmarks.general.run import cell_episodes

HERE = Path(__file__).resolve().parent
CELL = "babilong-mixed-4000"
DROP = re.compile(r"\b(dropped|left|discarded|put down)\b")

episodes = cell_episodes(CELL, "val", 60, 555555)
shipped = json.loads((HERE.parent / "explore_gate/product_val_default.json").read_text())
default = next(c for c in shipped["cells"] if c["cell"] == CELL)["per_question"]["default"]
BASELINES = {"untrained", "dense", "bm25", "dense+bm25"}
models = {}
for path in sys.argv[1:] or ["lastpick_mixed_val.json"]:
    run = json.loads((HERE / path).read_text())
    per_question = next(c for c in run["cells"] if c["cell"] == CELL)["per_question"]
    models.update({k: v for k, v in per_question.items() if k not in BASELINES})
base = default["em@facts"]
for task in ("qa2", "qa3"):
    rows = [(i, e) for i, e in enumerate(episodes) if e.meta.get("task") == task]
    for name, scores in models.items():
        got = scores["em@facts"]
        for kind in ("drop", "other"):
            chosen = [
                i
                for i, e in rows
                if any(DROP.search(e.chunks[j]) for j in e.support) == (kind == "drop")
            ]
            won = sum(got[i] > base[i] for i in chosen)
            lost = sum(got[i] < base[i] for i in chosen)
            print(
                f"{task} {name:8s} {kind:5s} stories {len(chosen):2d}: default {sum(base[i] for i in chosen):.0f}, "
                f"{name} {sum(got[i] for i in chosen):.0f} (won {won}, lost {lost})"
            )
