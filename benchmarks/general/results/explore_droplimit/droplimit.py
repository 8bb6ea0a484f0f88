"""Exploration (session 46): the supersede rule stops at a taken chunk about the same subject.

The shipped rule (``qrag_integrations.core.supersede``) replaces a pick ``p`` with its latest
later restatement ``c`` unless a restatement of ``p`` already taken lies between them. On the
validation qa2 stories whose gold facts put the object down ("John dropped the milk."), the
default picks the drop first and then John's *latest* move, past the drop (``drop_trace.txt``).
Here the limit is also any taken chunk between ``p`` and ``c`` that names every term ``p``
shares with the state text (the drop names "john"): evidence already found about the same
subject fixes the time the question is about, and a restatement past it is a later state.

Replaces ``superseding_pick`` in the module the search calls it from, then runs
``benchmarks.<general|babilong>.run`` with the remaining arguments::

    PYTHONPATH=training:. python benchmarks/general/results/explore_droplimit/droplimit.py \
        general --model ... --out ...

``DROPLIMIT=0``: the shipped rule (the patch returns what it returns). Written for the search as
of commit d30d614 (``superseding_pick`` took the state and scanned for its pool; it takes the step's
pool since): check that commit out to rerun it.
"""

import os
import sys

from qrag_integrations.core import supersede
from qrag_integrations.core.lexical import top_by_q

ON = os.environ.get("DROPLIMIT", "1") == "1"
shipped = supersede.superseding_pick


def superseding_pick(searcher, cands, state, picked, pick, state_text, margin):
    """The shipped rule, with the limit also at a taken chunk naming the pick's shared terms."""
    if not ON:
        return shipped(searcher, cands, state, picked, pick, state_text, margin)
    cfg = searcher.model.config
    rank, q, _ = pick
    shared = supersede.terms(state_text) & supersede.terms(cands.chunk(rank).text)
    if not shared:
        return pick
    doc = cands.chunk(rank).doc_id
    close = [
        hit
        for hit in top_by_q(searcher, cands, state, picked, supersede.POOL)
        if hit[0] > rank and hit[1] >= q - margin and cands.chunk(hit[0]).doc_id == doc
    ]
    if not close:
        return pick
    taken = [t for t in picked if t > rank and cands.chunk(t).doc_id == doc]
    same = supersede.restating(
        cands, rank, [r for r, _, _ in close] + taken, shared, cfg.supersede_similarity
    )
    about = {t for t in taken if shared <= supersede.terms(cands.chunk(t).text)}
    limit = min((t for t in taken if t in same or t in about), default=cands.n)
    later = [hit for hit in close if hit[0] in same and hit[0] < limit]
    return max(later) if later else pick


supersede.superseding_pick = superseding_pick

if __name__ == "__main__":
    import runpy

    target = sys.argv.pop(1)
    sys.argv[0] = f"benchmarks.{target}.run"
    runpy.run_module(f"benchmarks.{target}.run", run_name="__main__")
