"""Log the shipped default's search on one validation cell (seed 555555): per question, BM25's 50
best chunks for the question (rank, score), and per step after the first, Q's 10 best untaken
(rank, Q) and BM25's 10 best untaken ranks. Every step goes through the fused pick (lexical_steps
= the cell's picks) and returns Q's best there, so the picks are the shipped search's (checked:
SQuAD and HotpotQA per-question results equal ``../explore_gate/product_val_default.json``).
Written for the search of commit c4c7371 (it patches ``search.fused_best``). From the repository
root::

    PYTHONPATH=training:. python benchmarks/general/results/explore_confgate/log_steps.py \\
        squad /tmp/squad.json 400
"""

import json
import sys

import numpy as np
from qrag_training.baselines import distinct_text_embedder, greedy_retrieve

from benchmarks.general.run import PICKS, cell_episodes
from benchmarks.harness import results as harness
from benchmarks.harness.model_specs import load_with_settings
from qrag_integrations.core import lexical, search

harness.set_threads(2)
cell, out = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else None
k = PICKS[cell.split("-")[0]]
REC: list[dict] = []
_fused_best = lexical.fused_best


def fused_best(searcher, cands, words, state, picked, depth, dense=None):
    if not picked:
        return _fused_best(searcher, cands, words, state, picked, depth, dense)
    dense = lexical.top_by_q(searcher, cands, state, picked, depth) if dense is None else dense
    taken = set(picked)
    w = [int(r) for r in words if int(r) not in taken][:depth]
    REC.append(
        {"picked": list(picked), "dense": [[int(r), float(q)] for r, q, _ in dense], "words": w}
    )
    return dense[0] if dense else None


search.fused_best = fused_best
model, settings = load_with_settings(
    f"packaged:qrag-general-minilm:lexical_depth=10,lexical_steps={k}"
)
embed = distinct_text_embedder(model, batch_size=64)
rows = []
for i, e in enumerate(cell_episodes(cell, "val", n, 555555)):
    REC.clear()
    r = greedy_retrieve(model, [e], k, batch_size=1, embed=embed, settings=settings)[0]
    scores = np.asarray(
        lexical.bm25_index(e.chunks).get_scores(lexical.bm25_query(e.question)[0]), dtype=float
    )
    top = [int(j) for j in np.argsort(-scores, kind="stable")[:50] if scores[j] > 0]
    rows.append(
        {
            "support": list(e.support),
            "picked": r.picked,
            "q": r.scores,
            "task": e.meta.get("task"),
            "bm25": [[j, float(scores[j])] for j in top],
            "steps": list(REC),
        }
    )
with open(out, "w") as f:
    json.dump(rows, f)
