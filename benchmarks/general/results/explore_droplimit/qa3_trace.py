"""What the default picks on the 60 qa3 validation stories of babilong-mixed-4000 (seed 555555),
3 picks each (k = facts): gold facts and picks. Run from the repository root:
``PYTHONPATH=training:. python benchmarks/general/results/explore_droplimit/qa3_trace.py``."""

from qrag_training.baselines import greedy_retrieve

from benchmarks.general.run import cell_episodes
from benchmarks.harness.model_specs import load_with_settings

eps = [
    e
    for e in cell_episodes("babilong-mixed-4000", "val", 60, 555555)
    if e.meta.get("task") == "qa3"
]
model, settings = load_with_settings(
    "packaged:qrag-general-minilm:lexical_depth=10,lexical_steps=1"
)
res = greedy_retrieve(model, eps, 3, settings=settings)
hits = 0
for e, r in zip(eps, res):
    ok = set(e.support) <= set(r.picked[:3])
    hits += ok
    print(("HIT " if ok else "MISS") + f" Q: {e.question}")
    for j in sorted(e.support):
        print(f"   gold {j:4d}: {e.chunks[j]}")
    for j in r.picked[:3]:
        print(f"   pick {j:4d}: {e.chunks[j]}" + ("  *" if j in e.support else ""))
print(hits, len(eps))
