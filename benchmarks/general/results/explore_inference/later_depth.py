"""Exploration (session 42): BM25 fusion at later steps with a smaller depth. Steps after the
first pick among Q's ``LATER_DEPTH`` best (the first keeps ``lexical_depth``); patches the fused
pick of the retriever's search, then runs ``benchmarks.general.run`` with the arguments given."""

import os
import sys

from qrag_integrations.core import lexical, search

LATER = int(os.environ.get("LATER_DEPTH", "0"))
_fused_best = lexical.fused_best


def fused_best(searcher, cands, words, state, picked, depth, dense=None):
    if picked and LATER:
        depth = LATER
        dense = dense[:LATER] if dense is not None else None
    return _fused_best(searcher, cands, words, state, picked, depth, dense)


search.fused_best = fused_best

if __name__ == "__main__":
    from benchmarks.general.run import main

    main(sys.argv[1:])
