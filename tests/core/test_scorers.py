"""The brute-force reference (``tests/search_reference.py``) is the search's executable
specification: every scorer that scores exactly (the exact scan, FAISS pre-selection or a compact
copy that re-scores every candidate, a store's candidates when it returns them all) picks what it
picks, with its Q-values and positions, for any index, batch, filter, stop threshold and position
mode."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from search_reference import (
    MODES,
    QUERIES,
    IndexSource,
    as_tuples,
    assert_same,
    brute_force,
    random_index,
)

from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings
from qrag_integrations.stores.search import StoreSearcher

#: Settings whose scorer is exact on an index of ``n`` chunks (pre-selection and compact copies
#: pass every chunk on to the exact re-scoring).
SCORERS = {
    "exact": lambda n: SearchSettings(),
    "exact-small-blocks": lambda n: SearchSettings(block_size=3),
    "faiss": lambda n: SearchSettings(faiss_candidates=n, faiss_min_size=0),
    "int8": lambda n: SearchSettings(scan="int8", rescore=n),
    "binary": lambda n: SearchSettings(scan="binary", rescore=n),
    "bf16": lambda n: SearchSettings(scan="bf16", rescore=n),
    "store": None,  # a store that returns every chunk (StoreSearcher, candidates_per_step=n)
}
#: How the questions are searched: together, one at a time, each in its own index (in memory;
#: together over a store), or together under a metadata filter.
PATHS = ["batch", "alone", "each", "filtered"]


@settings(max_examples=40, deadline=None)
@given(
    mode=st.sampled_from(sorted(MODES)),
    scorer=st.sampled_from(sorted(SCORERS)),
    path=st.sampled_from(PATHS),
    n=st.integers(1, 13),
    seed=st.integers(0, 10_000),
    k=st.integers(1, 5),
    threshold=st.none() | st.floats(-0.3, 0.3),
)
def test_every_exact_scorer_picks_as_the_reference(
    make_model, mode: str, scorer: str, path: str, n: int, seed: int, k: int, threshold
) -> None:
    model = make_model(mode)
    if scorer in ("int8", "binary", "bf16") and model.config.position_mode is PositionMode.ABSOLUTE:
        scorer = "exact"  # compact copies scan runs of equal positions, which absolute has none of
    index = random_index(n, seed)
    settings = SCORERS[scorer]
    searcher: MultiStepSearcher | StoreSearcher
    if settings is None:
        searcher = StoreSearcher(model, IndexSource(index), candidates_per_step=n)
    else:
        searcher = MultiStepSearcher(model, index, settings(n))
    rows = None
    if path == "batch" or (path == "each" and isinstance(searcher, StoreSearcher)):
        got = searcher.search(QUERIES, k, threshold)
    elif path == "alone":
        got = [searcher.search([q], k, threshold)[0] for q in QUERIES]
    elif path == "each":
        assert isinstance(searcher, MultiStepSearcher)
        got = searcher.search_each(QUERIES, [index] * len(QUERIES), k, threshold)
    else:
        got = searcher.search(QUERIES, k, threshold, filter={"doc": "A"})
        rows = [i for i in range(n) if i % 3]  # random_index: chunk i is in "A" unless i % 3 == 0
    for query, hits in zip(QUERIES, got):
        assert_same(as_tuples(hits), brute_force(model, index, query, k, rows, threshold))
