"""Each model of the given ``benchmarks.general`` JSON files minus the shipped greedy search on
the same validation questions (``../round11_gpu/general_s64q1_val.json``), paired bootstrap.

``--supersede`` first: against the search with the supersede rule of session 43 instead
(``../explore_gate/product_val.json`` and ``supt_0.05_0.8_val_squadnoise.json``);
``--against=FILE:MODEL`` (repeatable, paths relative to ``results/``): against that model's
questions in those files, by cell (any split: e.g. a held-out file against another run on its
seed). Either way per-task em@facts of bAbI cells is printed too."""

import json
import sys
from pathlib import Path

from qrag_training.paired import paired_bootstrap

HERE = Path(__file__).resolve().parent
OPTIONS = [a for a in sys.argv[1:] if a.startswith("--")]
SOURCES = [tuple(a.split("=", 1)[1].rsplit(":", 1)) for a in OPTIONS if a.startswith("--against=")]
if "--supersede" in OPTIONS:
    SOURCES = [
        ("explore_gate/product_val.json", "supersede"),
        ("explore_gate/supt_0.05_0.8_val_squadnoise.json", "supt8"),
    ]
PER_TASK = bool(SOURCES)
SOURCES = SOURCES or [("round11_gpu/general_s64q1_val.json", "s64_q1")]
SHIPPED = {
    c["cell"]: c["per_question"][name]
    for path, name in SOURCES
    for c in json.loads((HERE.parent / path).read_text())["cells"]
}

for path in [a for a in sys.argv[1:] if not a.startswith("--")]:
    run = json.loads(Path(path).read_text())
    for cell in run["cells"]:
        for name in run["models"]:
            if name == "untrained":
                continue
            for metric, scores in cell["per_question"][name].items():
                base = SHIPPED[cell["cell"]][metric]
                p = paired_bootstrap(scores, base)
                print(
                    f"{Path(path).name} {cell['cell']} {name} {metric} "
                    f"{sum(scores) / len(scores):.3f} vs {sum(base) / len(base):.3f} "
                    f"{p.diff:+.3f} [{p.low:+.3f}, {p.high:+.3f}]"
                )
            if PER_TASK and cell["by_task"]:
                tasks = cell["by_task"].items()
                print("  em@facts:", " ".join(f"{t} {v[name]['em@facts']:.3f}" for t, v in tasks))
