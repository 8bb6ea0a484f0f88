"""Exploration patch (validation screen only): ``document_relative`` with each relaid document's
segments squeezed into the trained range of positions.

A document holding ``p`` picks is laid out with segment step ``relative_step // (p + 1)`` instead
of ``relative_step`` (one pick: segments at 0-9 and 10-19 instead of 0-18 and 20-38), so a later
sentence still sits higher, as in the fixed layout the weights were trained with (0-18), and the
picks still cut segments. Patches ``positions.document_runs`` where the in-memory search reads it
(``candidates``); store-backed search is not patched. Then runs ``benchmarks.general.run``::

    PYTHONPATH=training:. python benchmarks/general/results/explore_relpos/squeezed.py \\
        --model squeezed=packaged:qrag-general-minilm --cells ... --split val --seed 555560
"""

import sys

from benchmarks.general import run
from qrag_integrations.core import candidates, positions

_document_runs = positions.document_runs


def squeezed_runs(order, length, picked_ranks, step, span, offset=None):
    out = []
    for lo, hi in positions.picked_documents(order, length, picked_ranks):
        mine = [r for r in picked_ranks if lo <= r < hi]
        narrow = max(1, step // (len(set(mine)) + 1))
        out += _document_runs(order, length, mine, narrow, span, offset)
    return sorted(out)


candidates.document_runs = squeezed_runs
run.main(sys.argv[1:])
