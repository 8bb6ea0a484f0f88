"""Exploration (session 43): "a later near-duplicate supersedes" over the shipped weights. After
each step's pick ``p`` (the shipped rule, fusion included), a chunk of the same document, later
than ``p``, whose Q-value is within ``SUP_EPS`` of ``p``'s and whose chunk embedding has cosine
>= ``SUP_TAU`` with ``p``'s (the same kind of statement: "Mary went to the kitchen" / "... to the
garden") replaces it; the latest such chunk wins. Patches ``MultiStepSearcher.search_each``, then
runs ``benchmarks.<general|babilong>.run`` with the remaining arguments:

    PYTHONPATH=training:. SUP_EPS=0.05 SUP_TAU=0.8 python \
        benchmarks/general/results/explore_gate/supersede.py general --model ... --out ...

``SUP_EPS`` unset: the shipped search (the patch picks what it picks). ``SUP_TERMS=1``: only a
later chunk holding every BM25 term that the pick shares with the state text (question and
earlier picks; none shared: no replacement) may replace it.
"""

import math
import os
import sys

import torch

from qrag_integrations.core import search
from qrag_integrations.core.lexical import bm25_query, fused_best, top_by_q

EPS = float(os.environ.get("SUP_EPS", "nan"))
TAU = float(os.environ.get("SUP_TAU", "0.8"))
POOL = int(os.environ.get("SUP_POOL", "32"))
TERMS = os.environ.get("SUP_TERMS", "0") == "1"


def terms(text):
    """``text``'s BM25 terms (bm25s, English stop words), as a set."""
    return set(bm25_query(text)[0])


def supersede(self, cands, plain, state, picked, pick, state_text):
    """The pick after the rule: ``pick`` or a later near-duplicate of it with a close Q."""
    rank, q, _ = pick
    if math.isnan(EPS):
        return pick
    shared = terms(state_text) & terms(cands.chunk(rank).text) if TERMS else set()
    if TERMS and not shared:
        return pick
    doc = cands.chunk(rank).doc_id
    close = [
        (r, v, p)
        for r, v, p in top_by_q(self, cands, state, picked, POOL)
        if r > rank and v >= q - EPS and cands.chunk(r).doc_id == doc
    ]
    if not close:
        return pick
    emb = torch.nn.functional.normalize(plain.float(), dim=-1)
    sims = emb[[r for r, _, _ in close]] @ emb[rank]
    later = [
        c
        for c, s in zip(close, sims.tolist())
        if s >= TAU and shared <= terms(cands.chunk(c[0]).text)
    ]
    return max(later) if later else pick


def search_each(self, queries, indexes, k, stop_threshold=None):
    model = self.model
    cands = [self._searched.candidates(i.snapshot(), None, keep=False) for i in indexes]
    plain = [i.snapshot().embeddings for i in indexes]
    depth = self._lexical_depth(cands)
    fused_steps = min(k, self.settings.lexical_steps or model.config.lexical_steps or k)
    words = {}
    if depth:
        for b, query in enumerate(queries):
            words[b] = self._lexical.ranking(cands[b], query, depth + fused_steps)
    with torch.inference_mode():
        questions = model.embed_states(list(queries)).float()
    picked = [[] for _ in queries]
    results = [[] for _ in queries]
    for step in range(1, k + 1):
        active = [b for b in range(len(queries)) if len(picked[b]) < cands[b].n]
        if not active:
            break
        states = questions[active]
        if step > 1:
            texts = [self._state_text(queries[b], cands[b], picked[b]) for b in active]
            with torch.inference_mode():
                states = model.embed_states(texts).float()
                states = model.anchor_states(states, questions[active])
        for b, state in zip(active, states):
            if depth is not None and step <= fused_steps:
                pick = fused_best(self, cands[b], words[b], state, picked[b], depth)
            else:
                pick = top_by_q(self, cands[b], state, picked[b], 1)[0]
            text = self._state_text(queries[b], cands[b], picked[b])
            rank, q, pos = supersede(self, cands[b], plain[b], state, picked[b], pick, text)
            picked[b].append(rank)
            results[b].append(
                search.Hit(cands[b].chunk(rank), step, q, cands[b].position(rank, pos))
            )
    return results


search.MultiStepSearcher.search_each = search_each

if __name__ == "__main__":
    import importlib

    importlib.import_module(f"benchmarks.{sys.argv[1]}.run").main(sys.argv[2:])
