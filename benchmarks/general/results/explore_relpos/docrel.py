"""Exploration patch (validation only): ``position_mode=relative`` laid out inside each document.

Each document's chunks get the relative layout of that document alone (segments cut by the picks
inside it, :func:`~qrag_integrations.core.positions.relative_runs` on local ranks); a document
with no pick keeps segment 0, the document mode's fixed layout. On a one-document haystack this
is the relative layout; on one-chunk documents (HotpotQA paragraphs) the document mode's.
Patches ``MultiStepSearcher._runs`` (every exact in-memory scan reads its runs) and refuses the
paths that would not see it (``score_at_positions``: FAISS pre-selection, stores). Then runs
``benchmarks.general.run`` with the given arguments. From the repository root::

    PYTHONPATH=training:. python benchmarks/general/results/explore_relpos/docrel.py \\
        --model docrel=packaged:qrag-general-minilm:position_mode=relative --cells squad ...
"""

import sys

from benchmarks.general import run
from qrag_integrations.core import lexical, search
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.positions import relative_runs

_runs = search.MultiStepSearcher._runs


def doc_spans(cands) -> list[tuple[int, int]]:
    """``(start, stop)`` of each run of equal consecutive doc ids among the candidates."""
    ids = [cands.chunk(r).doc_id for r in range(cands.n)]
    starts = [i for i in range(len(ids)) if i == 0 or ids[i] != ids[i - 1]]
    return list(zip(starts, starts[1:] + [len(ids)]))


def runs_in_documents(self, cands, picked):
    cfg = self.model.config
    if cands.runs is not None or cfg.position_mode is not PositionMode.RELATIVE:
        return _runs(self, cands, picked)
    out = []
    for lo, hi in doc_spans(cands):
        local = [r - lo for r in picked if lo <= r < hi]
        out += [
            (lo + a, lo + b, p)
            for a, b, p in relative_runs(hi - lo, local, cfg.relative_step, cfg.relative_span)
        ]
    return out


def refuse(*args, **kwargs):
    raise RuntimeError("score_at_positions would not see the per-document layout")


search.MultiStepSearcher._runs = runs_in_documents
lexical.score_at_positions = refuse
if hasattr(search, "score_at_positions"):
    search.score_at_positions = refuse
run.main(sys.argv[1:])
