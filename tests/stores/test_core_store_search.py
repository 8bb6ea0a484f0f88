"""StoreSearcher (store-backed candidates, exact re-scoring) against the brute-force per-step loop."""

from __future__ import annotations

import pytest
import torch
from search_reference import (
    MODES,
    QUERIES,
    IndexSource,
    N,
    as_tuples,
    assert_same,
    brute_force,
    random_index,
    rules,
    with_config,
)

from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.search import MultiStepSearcher
from qrag_integrations.stores.search import StoreSearcher


@pytest.mark.parametrize("mode", list(MODES))
def test_full_candidates_match_brute_force(make_model, mode: str) -> None:
    model, index = make_model(mode), random_index()
    searcher = StoreSearcher(model, IndexSource(index), candidates_per_step=N, check_exact=True)
    results = searcher.search(QUERIES, k=6)
    for query, hits in zip(QUERIES, results):
        assert_same(as_tuples(hits), brute_force(model, index, query, 6))
    assert searcher.stats.steps == searcher.stats.exact_checked == 6 * len(QUERIES)
    assert searcher.stats.exact_rate == 1.0


#: The model's own search rules, each alone and together (a margin and similarity loose enough
#: that the random tiny model's chunks restate one another).
RULES = {
    "fusion": {"lexical_depth": 5},
    "fusion-gap": {"lexical_depth": 3, "lexical_steps": 1, "lexical_gap": 0.5},
    "fusion-score": {
        "lexical_depth": 3,
        "lexical_steps": 1,
        "lexical_gap": 0.5,
        "lexical_weight": 0.5,
    },
    "restatements": {"supersede_margin": 1e6, "supersede_similarity": -1.0},
    "all": {"lexical_depth": 4, "lexical_steps": 1, "lexical_gap": 0.5, "supersede_margin": 1e6},
}
PEOPLE, PLACES = ["mary", "john", "sandra", "daniel"], ["kitchen", "garden", "office", "hallway"]
STORY = [f"{PEOPLE[i % 4]} went to the {PLACES[(3 * i) % 4]} {i}" for i in range(18)]
ASKED = ["where is mary", "where is john the garden", "who went to the office", "daniel"]


def story_index() -> ChunkIndex:
    """Chunks whose words the questions name (BM25 has something to rank), in three documents."""
    index = ChunkIndex(32)
    emb = torch.randn(len(STORY), 32, generator=torch.Generator().manual_seed(5))
    metas = [{"doc": "A" if i % 3 else "B"} for i in range(len(STORY))]
    docs = [f"d{i // 6}" for i in range(len(STORY))]
    index.add(STORY, emb, metadatas=metas, ids=[f"s{i}" for i in range(len(STORY))], doc_ids=docs)
    return index


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("rules", list(RULES))
def test_the_models_rules_run_over_a_store_as_in_memory(make_model, mode: str, rules: str) -> None:
    """BM25 fusion and restatements over a store whose candidates hold every chunk: the in-memory
    search's picks, filtered or not (BM25 statistics of the whole store, as of the whole index)."""
    model, index = with_config(make_model(mode), **RULES[rules]), story_index()
    for filter in (None, {"doc": "A"}):
        store = StoreSearcher(model, IndexSource(index), candidates_per_step=len(STORY))
        got = store.search(ASKED, k=5, filter=filter)
        want = MultiStepSearcher(model, index).search(ASKED, k=5, filter=filter)
        for hits, expected in zip(got, want):
            assert_same(as_tuples(hits), as_tuples(expected))


def test_the_rules_change_store_picks_and_settings_switch_them_off(make_model) -> None:
    """The test above is not vacuous: over these chunks the rules change picks, and the search
    settings turn them off over a store as in memory."""
    base = make_model("relative")
    index, n = story_index(), len(STORY)
    off = rules(base, lexical_depth=0, supersede=False)
    for changes in RULES.values():
        model = with_config(base, **changes)
        ruled = StoreSearcher(model, IndexSource(index), candidates_per_step=n).search(ASKED, k=5)
        plain = StoreSearcher(model, IndexSource(index), n, policy=off).search(ASKED, k=5)
        assert [as_tuples(h) for h in ruled] != [as_tuples(h) for h in plain]
        for query, hits in zip(ASKED, plain):
            assert_same(as_tuples(hits), brute_force(base, index, query, 5))


@pytest.mark.parametrize("mode", ["relative", "absolute", "relative-anchored"])
def test_few_candidates_exact_whenever_the_arg_max_is_among_them(make_model, mode: str) -> None:
    """Per question: if every step's candidates held the exact arg-max the search is the exact
    one; small candidate counts miss at least once (and then may pick otherwise)."""
    model, index = make_model(mode), random_index()
    missed = exact_with_few = 0
    for cps in (1, 2, 4, 8, N):
        for query in QUERIES:
            searcher = StoreSearcher(
                model, IndexSource(index), candidates_per_step=cps, check_exact=True
            )
            hits = searcher.search([query], k=5)[0]
            stats = searcher.stats
            assert stats.steps == stats.exact_checked == 5
            if stats.exact_in_candidates == stats.exact_checked:
                assert_same(as_tuples(hits), brute_force(model, index, query, 5))
                exact_with_few += cps < N
            else:
                missed += 1
                assert cps < N
    assert missed > 0 and exact_with_few > 0


def test_asks_candidates_per_step_plus_picks(make_model) -> None:
    model, index = make_model("relative"), random_index()
    source = IndexSource(index)
    StoreSearcher(model, source, candidates_per_step=3).search(QUERIES[:1], k=4)
    assert source.asked == [3, 4, 5, 6]


def test_filter_is_passed_through_and_matches_filtered_exact_search(make_model) -> None:
    model, index = make_model("relative-step4"), random_index()
    rows = [i for i in range(N) if i % 3]
    hits = StoreSearcher(model, IndexSource(index), candidates_per_step=N).search(
        QUERIES, k=4, filter={"doc": "A"}
    )
    exact = MultiStepSearcher(model, index).search(QUERIES, k=4, filter={"doc": "A"})
    for query, got, want in zip(QUERIES, hits, exact):
        assert_same(as_tuples(got), brute_force(model, index, query, 4, rows=rows))
        assert_same(as_tuples(got), as_tuples(want))
        assert all(h.chunk.metadata["doc"] == "A" for h in got)


def test_stop_threshold_and_k_beyond_store(make_model) -> None:
    model, index = make_model("relative"), random_index(n=5)
    searcher = StoreSearcher(model, IndexSource(index), candidates_per_step=2)
    assert sorted(h.chunk.id for h in searcher.search(QUERIES[:1], k=50)[0]) == [
        f"c{i}" for i in range(5)
    ]
    exact = brute_force(model, index, QUERIES[0], 5)
    threshold = (exact[1][2] + exact[2][2]) / 2 if exact[1][2] > exact[2][2] else exact[0][2] + 1.0
    full = StoreSearcher(model, IndexSource(index), candidates_per_step=5)
    assert_same(
        as_tuples(full.search(QUERIES[:1], k=5, stop_threshold=threshold)[0]),
        brute_force(model, index, QUERIES[0], 5, threshold=threshold),
    )


def test_refuses_bad_settings_and_dimension(make_model) -> None:
    model = make_model("relative")
    with pytest.raises(QRAGError, match="candidates_per_step"):
        StoreSearcher(model, IndexSource(random_index()), candidates_per_step=0)
    with pytest.raises(IndexMismatchError, match="48-dimensional"):
        StoreSearcher(model, IndexSource(ChunkIndex(48)))
