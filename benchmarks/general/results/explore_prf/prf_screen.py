"""Screen (validation only): would BM25 of the question plus the picks' text, fused into step 2,
help? Records Q's 10 best at step 2 of the shipped search; offline variants for the 2nd pick."""

import json
import sys

import numpy as np
from qrag_training.baselines import distinct_text_embedder, greedy_retrieve

from benchmarks.general.run import cell_episodes
from benchmarks.harness import results as harness
from benchmarks.harness.model_specs import load_with_settings
from qrag_integrations.core import lexical, search

harness.set_threads(2)
cell, n = sys.argv[1], int(sys.argv[2])
REC = []
_fp = search.fused_picks


def fused_picks(searcher, fusion, step, active, states, picked, pool, one_layout):
    out = _fp(searcher, fusion, step, active, states, picked, pool, one_layout)
    if step == 2:
        b = active[0]
        dense = lexical.top_by_q(searcher, fusion.candidates[b], states[0], picked[b], 10)
        REC.append(
            {
                "dense": [[int(r), float(q)] for r, q, _ in dense],
                "chosen": int(out[0][0]) if out[0] else None,
            }
        )
    return out


search.fused_picks = fused_picks
model, settings = load_with_settings("packaged:qrag-general-minilm")
embed = distinct_text_embedder(model, batch_size=64)
rows = []
for e in cell_episodes(cell, "val", n, 555555):
    REC.clear()
    r = greedy_retrieve(model, [e], 2, batch_size=1, embed=embed, settings=settings)[0]
    if len(r.picked) < 2 or not REC:
        continue
    p1 = r.picked[0]
    idx = lexical.bm25_index(e.chunks)

    def rank(query, idx=idx, p1=p1):
        s = np.asarray(idx.get_scores(lexical.bm25_query(query)[0]), dtype=float)
        return [int(j) for j in np.argsort(-s, kind="stable") if s[j] > 0 and j != p1][:10]

    rows.append(
        {
            "support": list(e.support),
            "picked": r.picked,
            "task": e.meta.get("task"),
            "rec": REC[0],
            "bm_qp": rank(e.question + " " + e.chunks[p1]),
            "bm_p": rank(e.chunks[p1]),
            "bm_q": rank(e.question),
        }
    )
with open(f"/tmp/prf_{cell}.json", "w") as f:
    json.dump(rows, f)


def rrf(a, b):
    s = {}
    for lst in (a, b):
        for i, x in enumerate(lst):
            s[x] = s.get(x, 0) + 1 / (60 + i + 1)
    best = max(s.values())
    return (
        next(x for x in a if s.get(x) == best)
        if any(s.get(x) == best for x in a)
        else max(s, key=s.get)
    )


print(cell, len(rows), "questions")
print("first pick gold", np.mean([r["picked"][0] in r["support"] for r in rows]))
print("shipped em@2", np.mean([set(r["picked"]) >= set(r["support"]) for r in rows]))
for name in ("bm_qp", "bm_p", "bm_q"):
    for gap in (None, 0.03, 0.05, 0.1):
        hits = []
        for r in rows:
            d = [x for x, _ in r["rec"]["dense"]]
            qs = [q for _, q in r["rec"]["dense"]]
            if gap is not None and (len(qs) < 2 or qs[0] - qs[1] >= gap):
                c = r["picked"][1]
            else:
                c = rrf(d, r[name][:10])
            hits.append({r["picked"][0], c} >= set(r["support"]))
        print(f"  {name} gap {gap}: em@2 {np.mean(hits):.3f}")
