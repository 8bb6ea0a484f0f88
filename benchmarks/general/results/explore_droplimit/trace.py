"""What the default picks on one bAbI task's validation stories of babilong-mixed-4000 (seed
555555, 60 per task): each story's gold facts and picks (``*``: a gold), with k = the task's number
of facts. ``--drop``: only the stories whose gold facts put the object down ("John dropped the
milk."), with the person's other sentences.

Run from the repository root::

    PYTHONPATH=training:. [DROPLIMIT=1] python benchmarks/general/results/explore_droplimit/trace.py \\
        qa2 --drop > drop_trace.txt      # and: qa3 > qa3_trace.txt

``DROPLIMIT=1``: the search with ``droplimit.py``'s rule (written for the search of commit d30d614).
"""

import argparse
import os
import re
import sys

from qrag_training.baselines import greedy_retrieve

from benchmarks.general.run import cell_episodes
from benchmarks.harness.model_specs import load_with_settings

DROP = re.compile(r"\b(dropped|left|discarded|put down)\b")
DEFAULT = "packaged:qrag-general-minilm:lexical_depth=10,lexical_steps=1"

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("task")
p.add_argument("--drop", action="store_true")
p.add_argument("--model", default=DEFAULT)
args = p.parse_args()
if os.environ.get("DROPLIMIT") == "1":
    sys.path.insert(0, os.path.dirname(__file__))
    import droplimit  # noqa: F401

episodes = [
    e
    for e in cell_episodes("babilong-mixed-4000", "val", 60, 555555)
    if e.meta.get("task") == args.task
    and (not args.drop or any(DROP.search(e.chunks[j]) for j in e.support))
]
model, settings = load_with_settings(args.model)
k = max(len(e.support) for e in episodes)
hits = 0
for e, r in zip(episodes, greedy_retrieve(model, episodes, k, settings=settings)):
    ok = set(e.support) <= set(r.picked[:k])
    hits += ok
    print(("HIT " if ok else "MISS") + f" Q: {e.question}")
    for j in sorted(e.support):
        print(f"   gold {j:4d}: {e.chunks[j]}")
    for j in r.picked[:k]:
        print(f"   pick {j:4d}: {e.chunks[j]}" + ("  *" if j in e.support else ""))
    if args.drop:
        person = e.chunks[min(e.support)].split()[0]
        others = [
            j for j, c in enumerate(e.chunks) if c.startswith(person + " ") and not DROP.search(c)
        ]
        print(f"   {person}'s other sentences: {others}")
print(f"{hits} of {len(episodes)}")
