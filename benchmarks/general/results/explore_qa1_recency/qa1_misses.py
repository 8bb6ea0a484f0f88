"""Diagnostic (session 42): where a model's single pick goes on qa1 ("Where is Mary?": the gold
is the person's latest move). Counts, over validation stories (seed 555555, ~4K tokens, training
noise), right picks and misses: another move of the same person, earlier or later than the
gold, and in the gold's document-mode position bucket ``(i * M) // (L - 1)`` or not.

    PYTHONPATH=training:. python benchmarks/general/results/explore_qa1_recency/qa1_misses.py \
        OUT.json NAME=SPEC [NAME=SPEC ...]
"""

import json
import sys
from pathlib import Path

from qrag_training.baselines import greedy_retrieve
from qrag_training.data.babilong import babilong_dataset

from benchmarks.harness.model_specs import load_with_settings

SEED, STORIES, TOKENS = 555_555, 300, 4000


def misses(spec: str) -> dict:
    model, settings = load_with_settings(spec)
    episodes = babilong_dataset("qa1", STORIES, TOKENS, SEED, noise_kind="mixed")
    picks = greedy_retrieve(model, episodes, 1, settings=settings)
    span = int(model.config.relative_span * model.config.relative_step)
    out = {"stories": len(episodes), "right": 0, "same_person": 0, "other": 0}
    out |= {"earlier": 0, "later": 0, "same_bucket": 0}
    for episode, got in zip(episodes, picks):
        pick, gold, last = got.picked[0], episode.support[-1], len(episode.chunks) - 1
        if pick in episode.support:
            out["right"] += 1
            continue
        person = episode.question.rstrip("?").split()[-1]
        if person not in episode.chunks[pick].split():
            out["other"] += 1
            continue
        out["same_person"] += 1
        out["earlier" if pick < gold else "later"] += 1
        out["same_bucket"] += int((pick * span) // last == (gold * span) // last)
    return out


if __name__ == "__main__":
    result = {"seed": SEED, "tokens": TOKENS, "task": "qa1", "k": 1, "models": {}}
    for arg in sys.argv[2:]:
        name, _, spec = arg.partition("=")
        result["models"][name] = {"spec": spec, **misses(spec)}
        print(name, json.dumps(result["models"][name]))
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1) + "\n")
