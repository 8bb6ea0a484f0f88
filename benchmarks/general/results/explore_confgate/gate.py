"""Exploration (session 47): BM25 of the question fused into the picks after the first only when
the policy is unsure there, i.e. its two best untaken chunks are within a Q gap. Patches the fused
pick of the retriever's search (written for the search of commit c4c7371), then runs
``benchmarks.general.run`` with the arguments given. ``GATE_TERMS=novel``: the question's BM25
ranking there counts only chunks naming a question term that no pick names yet; ``GATE_STOP``:
see ``STOP``.

The gap of a model comes from its ``lexical_steps`` (a run can then hold two gates): 6 -> 0.02,
7 -> 0.03; give such a model ``lexical_steps`` >= every cell's picks so that every step reaches
the fused pick. Run from the repository root::

    PYTHONPATH=training:. python benchmarks/general/results/explore_confgate/gate.py \\
      --model g02=packaged:qrag-general-minilm:lexical_depth=10,lexical_steps=6 \\
      --model g03=packaged:qrag-general-minilm:lexical_depth=10,lexical_steps=7 \\
      --cells squad,hotpotqa,babilong-mixed-4000 --babi-n 60 --threads 2 --split val --out F.json
"""

import itertools
import os
import sys

import numpy as np

from qrag_integrations.core import lexical, search

GAPS = {6: 0.02, 7: 0.03}
NOVEL = os.environ.get("GATE_TERMS") == "novel"
#: ``GATE_STOP=sklearn``: question words in scikit-learn's English stop words (318) never count
#: as uncovered ("where", "what", "before"); the fused BM25 ranking itself is unchanged.
STOP = frozenset()
if os.environ.get("GATE_STOP") == "sklearn":
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as STOP
_fused_best = lexical.fused_best
_ranking = lexical.LexicalRanker.ranking


class Ranking(np.ndarray):
    """A BM25 ranking that remembers its question (the patched pick needs its terms)."""

    question = ""


def ranking(self, cands, question, limit=None):
    out = _ranking(self, cands, question, None if NOVEL else limit).view(Ranking)
    out.question = question
    return out


def terms(text):
    return set(lexical.bm25_query(text)[0])


def fused_best(searcher, cands, words, state, picked, depth, dense=None):
    gap = GAPS.get(searcher.settings.lexical_steps)
    if picked and gap is not None:
        dense = lexical.top_by_q(searcher, cands, state, picked, depth) if dense is None else dense
        if len(dense) > 1 and dense[0][1] - dense[1][1] >= gap:
            return dense[0]  # the policy is sure: its own pick
        if NOVEL:
            covered = [terms(cands.chunk(r).text) for r in picked]
            rest = terms(words.question).difference(STOP, *covered)
            untaken = (int(r) for r in words if int(r) not in picked)
            named = (r for r in untaken if rest and terms(cands.chunk(r).text) & rest)
            words = list(itertools.islice(named, depth))  # tokenize only as far as needed
    return _fused_best(searcher, cands, words, state, picked, depth, dense)


search.fused_best = fused_best
lexical.LexicalRanker.ranking = ranking

if __name__ == "__main__":
    from benchmarks.general.run import main

    main(sys.argv[1:])
