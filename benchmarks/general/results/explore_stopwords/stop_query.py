"""Exploration (session 49): the question's BM25 query in the search's lexical fusion leaves out
scikit-learn's 318 English stop words (bm25s's own list, Lucene's 33, keeps "where", "what",
"before", "which", "who"). Patches :func:`qrag_integrations.core.lexical.bm25_query` for the
fusion of a model whose settings name ``lexical_depth`` (give it the default's own depth, 10, so
that nothing else changes); a model without it runs the shipped search in the same process. The
supersede rule and the BM25 baselines keep the shipped query. Run from the repository root::

    PYTHONPATH=training:. python benchmarks/general/results/explore_stopwords/stop_query.py \\
      --model default=packaged:qrag-general-minilm \\
      --model stopq=packaged:qrag-general-minilm:lexical_depth=10 \\
      --cells squad,hotpotqa --threads 2 --split val --seed 555558 --out F.json
"""

import sys

from qrag_integrations.core import lexical, search
from qrag_integrations.core.stopwords import ENGLISH_STOP_WORDS

_bm25_query = lexical.bm25_query
_fusion_of = search.fusion_of
_fused_picks = search.fused_picks
ACTIVE = [False]


def bm25_query(question):
    tokens = _bm25_query(question)
    if not ACTIVE[0]:
        return tokens
    return [[t for t in row if t not in ENGLISH_STOP_WORDS] for row in tokens]


def _flagged(fn):
    def run(searcher, *args, **kwargs):
        ACTIVE[0] = searcher.settings.lexical_depth is not None
        try:
            return fn(searcher, *args, **kwargs)
        finally:
            ACTIVE[0] = False

    return run


lexical.bm25_query = bm25_query
search.fusion_of = _flagged(_fusion_of)
search.fused_picks = _flagged(_fused_picks)

if __name__ == "__main__":
    from benchmarks.general.run import main

    main(sys.argv[1:])
