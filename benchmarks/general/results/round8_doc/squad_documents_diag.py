"""Diagnostic: SQuAD val (articles 0-17, 400 q, the general benchmark's sample) with every paragraph
its own document (positions all 0 in document mode) vs articles as documents."""
import dataclasses, json, sys
import torch
from qrag_training.baselines import greedy_retrieve
from qrag_training.data.squad import load_squad_ood
from qrag_integrations.core.loading import load_model
torch.set_num_threads(2)
eps = load_squad_ood(group_size=18, n=400, seed=555555)
out = {}
for name, spec in [("d64_half", "/work/runs/s37/ck/d64_half"), ("d64", "/work/runs/s37/ck/d64")]:
    m = load_model(spec); m.config.lexical_depth = 10; m.config.lexical_steps = 1
    cache = {}
    def embed(texts, m=m, cache=cache):
        new = [t for t in dict.fromkeys(texts) if t not in cache]
        if new:
            cache.update(zip(new, m.embed_chunks(new, batch_size=64)))
        return torch.stack([cache[t] for t in texts])
    for docs in ("articles", "paragraphs"):
        e2 = eps if docs == "articles" else [dataclasses.replace(e, titles=[str(i) for i in range(len(e.chunks))]) for e in eps]
        r = greedy_retrieve(m, e2, 3, embed=embed)
        h1 = sum(x.picked[:1] == e.support for x, e in zip(r, eps)) / len(eps)
        h3 = sum(e.support[0] in x.picked[:3] for x, e in zip(r, eps)) / len(eps)
        out[f"{name}/{docs}"] = (h1, h3); print(name, docs, round(h1, 3), round(h3, 3), flush=True)
json.dump(out, open("/work/runs/s37/squad_sepdocs.json", "w"), indent=1)
