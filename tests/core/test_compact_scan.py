"""Compact scans (int8 / binary copies with exact re-scoring) against the brute-force search."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from search_reference import (
    QUERIES,
    TEXTS,
    N,
    as_tuples,
    assert_same,
    brute_force,
    embed_state,
    random_index,
)

from qrag_integrations.core.compact_scan import CompactScorer
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.exact_scan import ExactScorer
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.positions import layout
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings

KINDS = ["int8", "binary", "bf16"]
RUN_MODES = ["none", "none-anchored", "relative", "relative-step1", "relative-anchored"]


@pytest.fixture
def copy_of(make_model) -> Callable[[str], CompactScorer]:
    """Compact scorers by kind (their copy's scans; the exact scorer they fall back on is a tiny
    model's)."""
    exact = ExactScorer(make_model("none"), 65536)
    return lambda kind: CompactScorer(exact, kind, 400)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", RUN_MODES)
def test_rescoring_every_row_is_the_exact_search(make_model, kind: str, mode: str) -> None:
    model = make_model(mode)
    index = random_index()
    searcher = MultiStepSearcher(model, index, SearchSettings(scan=kind, rescore=N))
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=6)):
        assert_same(as_tuples(hits), brute_force(model, index, query, 6))


@pytest.mark.parametrize(("lo", "hi", "want"), [(20, 250, 40), (0, 300, 300), (299, 300, 5)])
def test_a_binary_run_is_ranked_as_a_faiss_index_restricted_to_it_ranks_it(
    copy_of, lo, hi, want
) -> None:
    """The scan of one run's slice of the binary codes gives what a FAISS index over every row
    gives with a range selector (the same codes, the same kernel)."""
    import faiss

    g = torch.Generator().manual_seed(5)
    emb, states = torch.randn(300, 32, generator=g), torch.randn(3, 32, generator=g)
    scores, rows = copy_of("binary").candidates(emb, states, lo, hi, want)
    index = faiss.IndexBinaryFlat(32)
    index.add(np.packbits(emb.numpy() > 0, axis=1))
    take = min(want, hi - lo)
    params = faiss.SearchParameters(sel=faiss.IDSelectorRange(lo, hi))
    expected, _ = index.search(np.packbits(states.numpy() > 0, axis=1), take, params=params)
    np.testing.assert_array_equal(scores[:, :take], -expected.astype(np.float32))
    assert (scores[:, take:] == -np.inf).all() and (rows[:, take:] == -1).all()
    assert ((rows[:, :take] >= lo) & (rows[:, :take] < hi)).all()


@pytest.mark.parametrize(("lo", "hi", "want"), [(20, 250, 40), (0, 300, 300), (299, 300, 5)])
@pytest.mark.parametrize("states", [3, 9])
def test_an_int8_run_is_ranked_by_its_integer_dot_products(
    copy_of, lo, hi, want, states: int
) -> None:
    """A run's int8 candidates are its rows ranked by the dot product of the int8 codes with the
    int8 state (numpy's integer matrix product), scaled back, best first."""
    g = torch.Generator().manual_seed(5)
    emb, q = torch.randn(300, 32, generator=g), torch.randn(states, 32, generator=g)
    scores, rows = copy_of("int8").candidates(emb, q, lo, hi, want)
    x = emb.numpy()
    scale = np.abs(x).max(axis=0) / 127
    codes = np.clip(np.rint(x / scale), -127, 127).astype(np.int64)
    weighted = q.numpy() * scale
    step = np.abs(weighted).max(axis=1, keepdims=True) / 127
    q8 = np.clip(np.rint(weighted / step), -127, 127).astype(np.int64)
    expected = (q8 @ codes[lo:hi].T) * step
    take = min(want, hi - lo)
    order = np.argsort(-expected, axis=1, kind="stable")[:, :take]
    np.testing.assert_allclose(scores[:, :take], np.take_along_axis(expected, order, 1), rtol=1e-5)
    assert rows[:, :take].tolist() == (order + lo).tolist()  # no ties among random rows
    assert (scores[:, take:] == -np.inf).all() and (rows[:, take:] == -1).all()
    # and the scores approximate the float inner products (within 2% of the largest)
    exact = np.take_along_axis(q.numpy() @ x[lo:hi].T, order, 1)
    np.testing.assert_allclose(exact, scores[:, :take], atol=0.02 * np.abs(exact).max())


@pytest.mark.parametrize("kind", ["int8", "binary"])
@pytest.mark.parametrize("taken", [[], [3, 150, 299]])
def test_the_runs_of_a_step_hold_the_best_candidates_over_all_runs(
    copy_of, kind: str, taken
) -> None:
    """One selection over every run's scores keeps the rows that the best of each run, then the
    best over all runs, keep (besides the picks)."""
    g = torch.Generator().manual_seed(9)
    emb, vecs = torch.randn(300, 32, generator=g), torch.randn(4, 32, generator=g)
    runs = [(0, 40, 0), (40, 41, 1), (41, 200, 2), (200, 300, 3)]
    scanner = copy_of(kind)
    found = scanner.candidates_over_runs(emb, vecs, runs, 25, taken)
    per_run = [
        scanner.candidates(emb, v[None], lo, hi, hi - lo) for (lo, hi, _), v in zip(runs, vecs)
    ]
    everything = sorted(
        ((float(s), int(r)) for sc, rw in per_run for s, r in zip(sc[0], rw[0]) if r not in taken),
        key=lambda x: (-x[0], x[1]),
    )
    got = sorted(
        ((float(s), int(r)) for sc, rw in found for s, r in zip(sc, rw) if r not in taken),
        key=lambda x: (-x[0], x[1]),
    )
    assert {r for _, r in got[:25]} == {r for _, r in everything[:25]}
    for (lo, hi, _), (_, rows) in zip(runs, found):
        assert ((rows >= lo) & (rows < hi)).all()


def test_an_int8_batch_is_scanned_in_groups_of_states(copy_of, monkeypatch) -> None:
    """A batch too large for one call is scanned in groups and gives the same candidates."""
    from qrag_integrations.core import compact_scan

    g = torch.Generator().manual_seed(2)
    emb, q = torch.randn(200, 16, generator=g), torch.randn(10, 16, generator=g)
    whole = copy_of("int8").candidates(emb, q, 0, 200, 7)
    monkeypatch.setattr(compact_scan, "INT8_SCORES_AT_ONCE", 600)  # 3 states a call
    grouped = copy_of("int8").candidates(emb, q, 0, 200, 7)
    np.testing.assert_array_equal(whole[1], grouped[1])
    np.testing.assert_array_equal(whole[0], grouped[0])


@pytest.mark.parametrize("kind", KINDS)
def test_few_candidates_give_distinct_picks_with_exact_q_values(make_model, kind: str) -> None:
    model = make_model("relative")
    index = _big_index(300)
    emb = index.snapshot().embeddings
    searcher = MultiStepSearcher(model, index, SearchSettings(scan=kind, rescore=2))
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=8)):
        ids = [h.chunk.id for h in hits]
        assert len(ids) == len(set(ids)) == 8
        # the first pick's Q is its exact Q (re-scored in float32), and no chunk beats the exact best
        cfg = model.config
        pos = layout(cfg.position_mode, 300, [], cfg.relative_step, cfg.relative_span)
        with torch.no_grad():
            q = model.q_values(embed_state(model, query), emb, torch.from_numpy(pos))[0]
        row = int(ids[0][1:])
        assert hits[0].q_value == pytest.approx(float(q[row]), abs=1e-5)
        assert hits[0].q_value <= float(q.max()) + 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_the_scan_finds_a_planted_row_within_its_run(copy_of, kind: str) -> None:
    """A run's candidates are its own rows."""
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(500, 32, generator=g)
    target = torch.randn(32, generator=g)
    emb[123] = 5 * target
    emb[400] = 5 * target
    scanner = copy_of(kind)
    assert scanner.candidates(emb, target[None], 0, 300, 1)[1][0, 0] == 123
    assert scanner.candidates(emb, target[None], 300, 500, 1)[1][0, 0] == 400
    rows = scanner.candidates(emb, target[None], 100, 130, 50)[1][0]
    assert set(rows[rows >= 0].tolist()) == set(range(100, 130))


def test_the_compact_copy_follows_index_updates(make_model) -> None:
    model = make_model("none")
    index = random_index()
    searcher = MultiStepSearcher(model, index, SearchSettings(scan="int8", rescore=N + 5))
    searcher.search(QUERIES, k=2)
    index.add(["a new chunk", "another new chunk"], torch.randn(2, 32) * 5, ids=["n1", "n2"])
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=4)):
        assert_same(as_tuples(hits), brute_force(model, index, query, 4))


@pytest.mark.parametrize("kind", KINDS)
def test_filtered_searches_scan_exactly(make_model, kind: str) -> None:
    model = make_model("relative")
    index = random_index()
    rows = [i for i in range(N) if i % 3]  # doc "A"
    searcher = MultiStepSearcher(model, index, SearchSettings(scan=kind, rescore=1))
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=4, filter={"doc": "A"})):
        assert_same(as_tuples(hits), brute_force(model, index, query, 4, rows=rows))


def test_bad_settings_name_the_problem(copy_of, make_model) -> None:
    with pytest.raises(QRAGError, match="scan must be one of"):
        SearchSettings(scan="int4")
    with pytest.raises(QRAGError, match="rescore must be"):
        SearchSettings(scan="int8", rescore=0)
    with pytest.raises(QRAGError, match="absolute positions"):
        MultiStepSearcher(make_model("absolute"), random_index(), SearchSettings(scan="binary"))
    odd = ChunkIndex(30)
    odd.add(TEXTS[:3], torch.randn(3, 30))
    with pytest.raises(QRAGError, match="divisible by 8"):
        copy_of("binary").candidates(odd.snapshot().embeddings, torch.randn(1, 30), 0, 3, 1)


def _big_index(n: int) -> ChunkIndex:
    index = ChunkIndex(32)
    g = torch.Generator().manual_seed(7)
    texts = [f"chunk {i} " + "x " * (i % 17) for i in range(n)]
    index.add(texts, torch.randn(n, 32, generator=g), ids=[f"b{i}" for i in range(n)])
    return index


@pytest.mark.parametrize("kind", KINDS)
def test_unused_numpy_rows_are_minus_one(copy_of, kind: str) -> None:
    emb = torch.randn(5, 32)
    rows = copy_of(kind).candidates(emb, torch.randn(2, 32), 0, 5, 8)[1]
    assert rows.shape == (2, 8)
    assert (np.sort(rows, axis=1)[:, :3] == -1).all()


def test_bf16_candidates_span_blocks(copy_of, monkeypatch) -> None:
    monkeypatch.setattr("qrag_integrations.core.compact_scan.BF16_BLOCK", 7)
    g = torch.Generator().manual_seed(3)
    emb, states = torch.randn(50, 32, generator=g), torch.randn(3, 32, generator=g)
    rows = copy_of("bf16").candidates(emb, states, 4, 45, 5)[1]
    exact = (states @ emb[4:45].T).topk(5, dim=1).indices + 4
    for got, want in zip(rows, exact):
        assert set(got.tolist()) == set(want.tolist())


@pytest.mark.parametrize("mode", ["none-anchored", "relative"])
def test_a_bf16_batch_with_few_candidates_picks_as_the_exact_scan(make_model, mode: str) -> None:
    model = make_model(mode)
    index = _big_index(300)
    exact = MultiStepSearcher(model, index).search(QUERIES, k=5)
    bf16 = MultiStepSearcher(model, index, SearchSettings(scan="bf16", rescore=10))
    for a, b in zip(exact, bf16.search(QUERIES, k=5)):
        assert [h.chunk.id for h in a] == [h.chunk.id for h in b]
        assert [h.q_value for h in a] == pytest.approx([h.q_value for h in b], abs=1e-5)


def test_a_lone_question_scans_exactly_without_a_bf16_copy(make_model) -> None:
    model = make_model("none")
    index = random_index()
    searcher = MultiStepSearcher(model, index, SearchSettings(scan="bf16", rescore=1))
    hits = searcher.search(QUERIES[:1], k=4)[0]
    assert_same(as_tuples(hits), brute_force(model, index, QUERIES[0], 4))
    assert searcher._compact is not None and searcher._compact._slot._built is None


@pytest.mark.parametrize("queries", [1, 8])
def test_small_faiss_searches_run_on_one_thread_and_restore_the_count(
    copy_of, queries: int
) -> None:
    import faiss

    from qrag_integrations.core.threads import faiss_threads_for

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    try:
        with faiss_threads_for(queries):
            inside = faiss.omp_get_max_threads()
        assert inside == (1 if queries == 1 else 2)
        assert faiss.omp_get_max_threads() == 2
        emb, states = torch.randn(300, 32), torch.randn(queries, 32)
        for kind in ("int8", "binary"):
            rows = copy_of(kind).candidates(emb, states, 0, 300, 5)[1]
            assert rows.shape == (queries, 5) and (rows >= 0).all()
    finally:
        faiss.omp_set_num_threads(before)
