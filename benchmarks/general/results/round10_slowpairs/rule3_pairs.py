"""Rule 3 of round 10 (session 38): a candidate's validation cells paired with the shipped default's
from an earlier run on the same questions (general_round8_doc_val.json, model "general"); the
dense and BM25 rows of both runs must agree question by question, which shows the questions are
the same. Usage: python rule3_pairs.py CANDIDATE_JSON NAME [OUT.json [EARLIER.json REF_NAME]]
(session 39: another earlier run and its model, e.g. round10_slowpairs/general_t11_val.json t11cpu)"""

import json
import sys
from pathlib import Path

from qrag_training.paired import paired_bootstrap

EARLIER, REF = "benchmarks/general/results/general_round8_doc_val.json", "general"
if len(sys.argv) > 5:
    EARLIER, REF = sys.argv[4], sys.argv[5]
new, name = json.loads(Path(sys.argv[1]).read_text()), sys.argv[2]
old = {c["cell"]: c for c in json.loads(Path(EARLIER).read_text())["cells"]}
rows = []
for cell in new["cells"]:
    before = old[cell["cell"]]
    for base in ("dense", "bm25"):
        assert cell["per_question"][base] == before["per_question"][base], (cell["cell"], base)
    for metric, got in cell["per_question"][name].items():
        ref = before["per_question"][REF][metric]
        d = paired_bootstrap(got, ref)
        verdict = "worse" if d.high < 0 else "better" if d.low > 0 else "tie"
        rows.append(
            [
                cell["cell"],
                metric,
                sum(got) / len(got),
                sum(ref) / len(ref),
                d.diff,
                d.low,
                d.high,
                verdict,
            ]
        )
        print(
            f"{cell['cell']:>22} {metric:>8}: {rows[-1][2]:.3f} vs default {rows[-1][3]:.3f} "
            f"({d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}] {verdict})"
        )
if len(sys.argv) > 3:
    Path(sys.argv[3]).write_text(
        json.dumps(
            {"candidate": sys.argv[1], "earlier": EARLIER, "ref": REF, "rows": rows}, indent=1
        )
    )
