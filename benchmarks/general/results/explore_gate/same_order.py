"""Exploration (session 44): a restatement names the shared terms in the same order. With
``SUP_ORDER=1``, a chunk restates the pick (``supersede.restating``) only if the terms the pick
shares with the state text come in the same order in both (first occurrences): "Jeff passed the
football to Fred." does not restate "Fred handed the football to Jeff." for "Who did Fred give
the football to?". Unset: the shipped rule. Written against commit 1af3415 (on later code,
where C ships, unset and ``SUP_ORDER=1`` are the same). Patches ``supersede.restating``, then runs
``benchmarks.<general|babilong>.run`` with the remaining arguments."""

import os
import sys

from qrag_integrations.core import supersede as sup
from qrag_integrations.core.lexical import bm25_query

ORDER = os.environ.get("SUP_ORDER", "0") == "1"
orig = sup.restating


def order(text, shared):
    seen = []
    for token in bm25_query(text)[0]:
        if token in shared and token not in seen:
            seen.append(token)
    return seen


def restating(cands, rank, others, shared, similarity):
    found = orig(cands, rank, others, shared, similarity)
    if not ORDER:
        return found
    want = order(cands.chunk(rank).text, shared)
    return {o for o in found if order(cands.chunk(o).text, shared) == want}


sup.restating = restating

if __name__ == "__main__":
    import importlib

    importlib.import_module(f"benchmarks.{sys.argv[1]}.run").main(sys.argv[2:])
