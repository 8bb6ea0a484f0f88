"""Which qa3 picks the novel-terms gate changes (session 47, validation only): the shipped search
and the gate (``gate.py`` with ``GATE_TERMS=novel``, g 0.03) on the qa3 stories of one bAbI cell
(seed 555555, 60 per task), k = 3; prints each story whose fact EM differs, with both searches'
picks (``*``: a gold fact). From the repository root::

    PYTHONPATH=training:. python benchmarks/general/results/explore_confgate/qa3_flips.py \\
        babilong-squad-32000 > qa3_flips.txt
"""

import os
import sys

os.environ["GATE_TERMS"] = "novel"
sys.path.insert(0, os.path.dirname(__file__))
import gate  # noqa: F401  (patches the search: a model with lexical_steps=7 is gated at 0.03)
from qrag_training.baselines import greedy_retrieve

from benchmarks.general.run import cell_episodes
from benchmarks.harness.model_specs import load_with_settings

SPEC = "packaged:qrag-general-minilm:lexical_depth=10,lexical_steps="
cell = sys.argv[1]
episodes = [e for e in cell_episodes(cell, "val", 60, 555555) if e.meta.get("task") == "qa3"]
runs = {}
for name, steps in (("shipped", 1), ("gated", 7)):
    model, settings = load_with_settings(SPEC + str(steps))
    runs[name] = greedy_retrieve(model, episodes, 3, settings=settings)
for e, a, b in zip(episodes, runs["shipped"], runs["gated"]):
    hit_a, hit_b = set(e.support) <= set(a.picked), set(e.support) <= set(b.picked)
    if hit_a == hit_b:
        continue
    print(("LOST" if hit_a else "WON ") + f" Q: {e.question}")
    for name, r in (("shipped", a), ("gated", b)):
        for step, j in enumerate(r.picked, 1):
            star = "  *" if j in e.support else ""
            print(f"   {name} step {step} {j:5d}: {e.chunks[j]}{star}")
print(
    "qa3 em@3:",
    {
        n: sum(set(e.support) <= set(r.picked) for e, r in zip(episodes, rs))
        for n, rs in runs.items()
    },
    "of",
    len(episodes),
)
