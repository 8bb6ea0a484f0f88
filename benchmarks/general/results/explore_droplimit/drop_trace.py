"""What the default picks on the qa2 stories of babilong-mixed-4000 (validation, seed 555555)
whose gold facts put the object down: each story's gold facts and picks (chunk index, text).

Run from the repository root: ``PYTHONPATH=training:. [DROPLIMIT=1] python
benchmarks/general/results/explore_droplimit/drop_trace.py [SPEC]`` (``DROPLIMIT=1``: with
``droplimit.py``'s rule)."""

import os
import re
import sys

from qrag_training.baselines import greedy_retrieve

from benchmarks.general.run import cell_episodes
from benchmarks.harness.model_specs import load_with_settings

if os.environ.get("DROPLIMIT") == "1":  # the search with droplimit.py's rule
    sys.path.insert(0, os.path.dirname(__file__))
    import droplimit  # noqa: F401

DROP = re.compile(r"\b(dropped|left|discarded|put down)\b")
SPEC = (
    sys.argv[1]
    if len(sys.argv) > 1
    else "packaged:qrag-general-minilm:lexical_depth=10,lexical_steps=1"
)

episodes = [
    e
    for e in cell_episodes("babilong-mixed-4000", "val", 60, 555555)
    if e.meta.get("task") == "qa2" and any(DROP.search(e.chunks[j]) for j in e.support)
]
model, settings = load_with_settings(SPEC)
results = greedy_retrieve(model, episodes, 2, settings=settings)
hits = 0
for e, r in zip(episodes, results):
    ok = set(e.support) <= set(r.picked[:2])
    hits += ok
    print(("HIT " if ok else "MISS") + f" Q: {e.question}")
    for j in sorted(e.support):
        print(f"   gold {j:4d}: {e.chunks[j]}")
    for j in r.picked[:2]:
        print(f"   pick {j:4d}: {e.chunks[j]}")
    person = e.chunks[min(e.support, key=lambda j: -1 if DROP.search(e.chunks[j]) else j)].split()[
        0
    ]
    moves = [j for j, c in enumerate(e.chunks) if c.startswith(person + " ") and not DROP.search(c)]
    print(f"   {person}'s other sentences: {moves}")
print(f"{hits} of {len(episodes)}")
