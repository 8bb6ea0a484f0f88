"""Each model of the given ``benchmarks.general`` JSON files minus the shipped greedy search on
the same validation questions (``../round11_gpu/general_s64q1_val.json``), paired bootstrap."""

import json
import sys
from pathlib import Path

from qrag_training.paired import paired_bootstrap

HERE = Path(__file__).resolve().parent
REFERENCE = json.loads((HERE.parent / "round11_gpu" / "general_s64q1_val.json").read_text())
SHIPPED = {c["cell"]: c["per_question"]["s64_q1"] for c in REFERENCE["cells"]}

for path in sys.argv[1:]:
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
