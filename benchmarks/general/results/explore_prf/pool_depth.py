"""Diagnostic: the default's search settings on HotpotQA val, pooled (validation only)."""

import sys
import time

from qrag_training.baselines import distinct_text_embedder
from qrag_training.data.hotpotqa import load_hotpotqa

from benchmarks.harness import results as harness
from benchmarks.harness.model_specs import load_with_model_settings
from benchmarks.hotpotqa import run as hp

harness.set_threads(2)
episodes = [e for e in load_hotpotqa("val") if len(e.support) >= 2]
problem = hp.build_problem(episodes, pooled=True)
print(len(episodes), "questions", len(problem.texts), "paragraphs", flush=True)
embed = None
for spec in sys.argv[1:]:
    model = load_with_model_settings(spec)
    if embed is None:
        embed = distinct_text_embedder(model, batch_size=64)
        embed(problem.texts)
    t0 = time.perf_counter()
    picks, _ = hp.qrag_picks(model, embed, problem, 4)
    m = hp.metrics(picks, problem.gold)
    first = sum(p[0] in g for p, g in zip(picks, problem.gold)) / len(picks)
    print(
        f"{spec}: first-gold {first:.3f} "
        + " ".join(f"{k} {m[k]:.3f}" for k in ("em@2", "em@4", "recall@2", "recall@4"))
        + f" ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
