"""Exploration (session 44): a pick made after a later restatement of it was already taken is
deliberate (a question about an earlier state) and is not superseded. Patches
``supersede.superseding_pick``; ``SUP_KEEP=A``: keep ``p`` when a taken chunk of its document,
later than ``p``, restates it (cosine >= similarity, holds the shared terms); ``SUP_KEEP=B``: a
replacement may not lie past such a taken chunk. Unset: the shipped rule. Written against the
rule of commit 610ec0a (on later code, where B ships, unset and B are the same). Then runs
``benchmarks.<general|babilong>.run`` with the remaining arguments."""

import os
import sys

import torch

from qrag_integrations.core import supersede as sup

KEEP = os.environ.get("SUP_KEEP", "")
orig = sup.superseding_pick


def restates(cands, cfg, rank, others, shared):
    if not others:
        return []
    rows = torch.tensor([rank] + others, device=cands.unrotated.device)
    unit = torch.nn.functional.normalize(cands.unrotated[rows].float(), dim=-1)
    sims = (unit[1:] @ unit[0]).tolist()
    return [
        o
        for o, s in zip(others, sims)
        if s >= cfg.supersede_similarity and shared <= sup.terms(cands.chunk(o).text)
    ]


def patched(searcher, cands, state, picked, pick, state_text, margin):
    if not KEEP:
        return orig(searcher, cands, state, picked, pick, state_text, margin)
    rank = pick[0]
    shared = sup.terms(state_text) & sup.terms(cands.chunk(rank).text)
    if not shared:
        return pick
    doc = cands.chunk(rank).doc_id
    later_taken = [t for t in picked if t > rank and cands.chunk(t).doc_id == doc]
    blocking = restates(cands, searcher.model.config, rank, later_taken, shared)
    if not blocking:
        return orig(searcher, cands, state, picked, pick, state_text, margin)
    if KEEP == "A":
        return pick
    out = orig(searcher, cands, state, picked + [], pick, state_text, margin)
    # B: the latest replacement before the first blocking chunk; recompute by restricting
    limit = min(blocking)
    if out[0] < limit:
        return out
    cfg = searcher.model.config
    close = [
        hit
        for hit in sup.top_by_q(searcher, cands, state, picked, sup.POOL)
        if rank < hit[0] < limit
        and hit[1] >= pick[1] - margin
        and cands.chunk(hit[0]).doc_id == doc
    ]
    ok = restates(cands, cfg, rank, [h[0] for h in close], shared)
    later = [h for h in close if h[0] in ok]
    return max(later) if later else pick


sup.superseding_pick = patched

if __name__ == "__main__":
    import importlib

    importlib.import_module(f"benchmarks.{sys.argv[1]}.run").main(sys.argv[2:])
