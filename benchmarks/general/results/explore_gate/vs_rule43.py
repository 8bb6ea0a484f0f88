"""The held-out report of session 44, paired per question: the default (the supersede rule with
the limit at a taken restatement and the terms' order) against the session-43 rule
(``general_test8_rule43.json``, a worktree of commit 610ec0a, same seed) and against the search
without the rule. Run from the repository root; writes nothing (``general_test8_paired.txt``
holds its output)."""

import json
from pathlib import Path

from qrag_training.paired import paired_bootstrap

RESULTS = Path("benchmarks/general/results")
NEW = {c["cell"]: c for c in json.loads((RESULTS / "general_test8.json").read_text())["cells"]}
OLD = {
    c["cell"]: c for c in json.loads((RESULTS / "general_test8_rule43.json").read_text())["cells"]
}

for cell, new in NEW.items():
    old = OLD[cell]
    for metric, scores in new["per_question"]["default"].items():
        for other, base in (
            ("rule43", old["per_question"]["rule43"][metric]),
            ("no_supersede", new["per_question"]["no_supersede"][metric]),
        ):
            p = paired_bootstrap(scores, base)
            print(
                f"{cell} {metric} default {sum(scores) / len(scores):.3f} vs {other} "
                f"{sum(base) / len(base):.3f}: {p.diff:+.3f} [{p.low:+.3f}, {p.high:+.3f}]"
            )
    if old["by_task"]:
        print(
            "   rule43 by task:",
            {t: round(v["rule43"]["em@facts"], 3) for t, v in old["by_task"].items()},
        )
    print(
        "   rule43 vs dense:",
        {
            k: (round(v["diff"], 3), v["verdict"])
            for k, v in old["paired_vs_dense"]["rule43"].items()
        },
    )
