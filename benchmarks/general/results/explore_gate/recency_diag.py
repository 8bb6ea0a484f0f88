"""Diagnostic (session 43): on qa1 ("Where is Mary?", the gold is the person's latest move),
how far below the best Q-value of the bare question is the gold, and would a near-tie rule
(among chunks within EPS of the best Q, take the latest in its document) pick it?

    PYTHONPATH=training:. python benchmarks/general/results/explore_gate/recency_diag.py OUT.json SPEC
"""

import json
import sys
from pathlib import Path

import torch
from qrag_training.baselines import _chunk_embedder
from qrag_training.data.babilong import babilong_dataset
from qrag_training.documents import episode_doc_ids

from benchmarks.harness.model_specs import load_with_settings
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.lexical import top_by_q
from qrag_integrations.core.search import MultiStepSearcher

SEED, STORIES, TOKENS = 555_555, 300, 4000
EPS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05)


def main(out: str, spec: str) -> None:
    model, settings = load_with_settings(spec)
    episodes = babilong_dataset("qa1", STORIES, TOKENS, SEED, noise_kind="mixed")
    embed = _chunk_embedder(model, 128)
    gaps, right = [], {e: 0 for e in EPS}
    model.eval()
    for episode in episodes:
        index = ChunkIndex(model.embedding_dim, device=model.device)
        index.add(
            episode.chunks,
            embed(episode.chunks),
            ids=[str(i) for i in range(len(episode.chunks))],
            doc_ids=episode_doc_ids(episode),
        )
        searcher = MultiStepSearcher(model, index, settings)
        cands = searcher._searched.candidates(index.snapshot(), None, keep=False)
        with torch.inference_mode():
            state = model.embed_states([episode.question]).float()[0]
        top = top_by_q(searcher, cands, state, [], cands.n)
        q = {r: v for r, v, _ in top}
        best = top[0][1]
        gold = episode.support[-1]
        gaps.append(best - q[gold])
        for eps in EPS:
            near = [r for r, v, _ in top if v >= best - eps]
            right[eps] += int(max(near) == gold)
    gaps_t = torch.tensor(gaps)
    result = {
        "spec": spec,
        "seed": SEED,
        "stories": len(episodes),
        "gold_is_best": int((gaps_t == 0).sum()),
        "gap_quantiles": {str(p): float(torch.quantile(gaps_t, p)) for p in (0.25, 0.5, 0.75, 0.9)},
        "latest_within_eps_right": {str(e): right[e] for e in EPS},
    }
    print(json.dumps(result, indent=1))
    Path(out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
