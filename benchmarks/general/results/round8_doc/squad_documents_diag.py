"""One-off diagnostic (session 37): SQuAD validation (articles 0-17, the general benchmark's 400
questions) with each article one document vs each paragraph its own document (then document
positions are all 0) vs the whole pool one document (session 38). Usage: python squad_documents_diag.py NAME=CHECKPOINT... OUT.json"""

import dataclasses
import json
import sys

import torch
from qrag_training.baselines import greedy_retrieve
from qrag_training.data.squad import load_squad_ood

from qrag_integrations.core.loading import load_model

torch.set_num_threads(2)
episodes = load_squad_ood(group_size=18, n=400, seed=555555)
out = {}
for spec in sys.argv[1:-1]:
    name, path = spec.split("=", 1)
    model = load_model(path)
    model.config.lexical_depth, model.config.lexical_steps = 10, 1
    cache: dict[str, torch.Tensor] = {}

    def embed(texts, model=model, cache=cache):  # each paragraph embedded once for all questions
        new = [t for t in dict.fromkeys(texts) if t not in cache]
        if new:
            cache.update(zip(new, model.embed_chunks(new, batch_size=64)))
        return torch.stack([cache[t] for t in texts])

    for docs in ("articles", "paragraphs", "pool"):
        searched = episodes
        if docs == "paragraphs":
            searched = [
                dataclasses.replace(e, titles=[str(i) for i in range(len(e.chunks))])
                for e in episodes
            ]
        elif docs == "pool":  # the whole pool one document (a retriever's from_texts)
            searched = [dataclasses.replace(e, titles=None) for e in episodes]
        found = greedy_retrieve(model, searched, 3, embed=embed)
        hit1 = sum(r.picked[:1] == e.support for r, e in zip(found, episodes)) / len(episodes)
        hit3 = sum(e.support[0] in r.picked[:3] for r, e in zip(found, episodes)) / len(episodes)
        out[f"{name}/{docs}"] = (hit1, hit3)
        print(name, docs, round(hit1, 3), round(hit3, 3), flush=True)
with open(sys.argv[-1], "w") as f:
    json.dump(out, f, indent=1)
