"""Document position mode searched two ways: on a rotated copy of the embeddings (many short
documents) and on the stored embeddings run by run of equal fixed positions (few long runs, no
copy). Both are the brute-force search; ``MIN_MEAN_RUN`` picks the way."""

from __future__ import annotations

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
    random_index,
    rules,
)

from qrag_integrations.core import positions
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.index import ChunkIndex, DocumentRotation
from qrag_integrations.core.positions import fixed_runs
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings

DOCUMENT_MODES = [
    "document",
    "document-anchored",
    "document-slow",
    "document-last-pick",
    "document-relative",
    "document-relative-anchored",
]
#: MIN_MEAN_RUN values: 1 = runs for the 13-chunk test index (13 runs), 10**9 = always a copy
WAYS = {"runs": 1, "copy": 10**9}


@pytest.fixture(params=list(WAYS))
def way(request, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(positions, "MIN_MEAN_RUN", WAYS[request.param])
    return request.param


def test_fixed_runs_are_the_runs_of_equal_positions() -> None:
    assert fixed_runs(np.array([0, 0, 3, 3, 3, 0, 7], dtype=np.int64)) == (
        (0, 2, 0),
        (2, 5, 3),
        (5, 6, 0),
        (6, 7, 7),
    )
    assert fixed_runs(np.zeros(4, dtype=np.int64)) == ((0, 4, 0),)
    assert fixed_runs(np.zeros(0, dtype=np.int64)) == ()


def test_runs_search_the_stored_embeddings_without_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    index = random_index()
    snap = index.snapshot()
    config = QRAGConfig(base_model="unused", position_mode="document")
    monkeypatch.setattr(positions, "MIN_MEAN_RUN", 1)
    got = DocumentRotation(config).candidates(snap, None)
    assert got.emb is snap.embeddings and got.snap is snap and got.runs is not None
    assert [p for _, _, p in got.runs] == [int(got.fixed[a]) for a, _, _ in got.runs]
    monkeypatch.setattr(positions, "MIN_MEAN_RUN", 10**9)
    copied = DocumentRotation(config).candidates(snap, None)
    assert copied.runs is None and copied.emb.data_ptr() != snap.embeddings.data_ptr()
    np.testing.assert_array_equal(copied.fixed, got.fixed)


def test_one_chunk_documents_need_neither_copy_nor_rotation() -> None:
    index = ChunkIndex(32)
    docs = [f"d{i}" for i in range(5)]  # each its own document: every position 0
    index.add(TEXTS[:5], torch.randn(5, 32), doc_ids=docs)
    snap = index.snapshot()
    config = QRAGConfig(base_model="unused", position_mode="document")
    got = DocumentRotation(config).candidates(snap, None)
    assert got.emb is snap.embeddings and got.runs == ((0, 5, 0),)


@pytest.mark.parametrize("mode", DOCUMENT_MODES)
@pytest.mark.parametrize("block_size", [3, 65536])
def test_both_ways_are_the_brute_force_search(make_model, way, mode: str, block_size: int) -> None:
    model = make_model(mode)
    index = random_index()
    searcher = MultiStepSearcher(model, index, SearchSettings(block_size=block_size))
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=6)):
        assert_same(as_tuples(hits), brute_force(model, index, query, 6))
    one = searcher.search(QUERIES[:1], k=6)[0]  # one question: the CPU scan of one state
    assert_same(as_tuples(one), brute_force(model, index, QUERIES[0], 6))


@pytest.mark.parametrize("mode", ["document", "document-relative"])
def test_both_ways_with_a_filter_and_per_question_indexes(make_model, way, mode: str) -> None:
    model = make_model(mode)
    index = random_index()
    snap = index.snapshot()
    rows = [i for i in range(N) if i % 3]
    searcher = MultiStepSearcher(model, index)
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=4, filter={"doc": "A"})):
        assert_same(as_tuples(hits), brute_force(model, index, query, 4, rows=rows))
    other = random_index(seed=3)
    got = searcher.search_each(QUERIES[:2], [index, other], k=3)
    assert_same(as_tuples(got[0]), brute_force(model, index, QUERIES[0], 3))
    assert_same(as_tuples(got[1]), brute_force(model, other, QUERIES[1], 3))
    assert snap.embeddings is index.snapshot().embeddings  # nothing stored was rotated


@pytest.mark.parametrize(
    "mode", ["document-anchored", "document-last-pick", "document-relative-anchored"]
)
@pytest.mark.parametrize("settings", ["faiss", "int8", "bf16"])
def test_both_ways_with_faiss_and_compact_scans(make_model, way, settings: str, mode: str) -> None:
    model = make_model(mode)
    index = random_index()
    if settings == "faiss":
        chosen = SearchSettings(faiss_candidates=N, faiss_min_size=0)
    else:
        chosen = SearchSettings(scan=settings, rescore=N)
    searcher = MultiStepSearcher(model, index, chosen)
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=5)):
        assert_same(as_tuples(hits), brute_force(model, index, query, 5))


@pytest.mark.parametrize("mode", ["document", "document-relative"])
@pytest.mark.parametrize("depth", [1, 3, 50])
def test_lexical_fusion_picks_the_same_either_way(
    make_model, monkeypatch: pytest.MonkeyPatch, depth: int, mode: str
) -> None:
    model = make_model(mode)
    index = random_index()
    got = {}
    for name, value in WAYS.items():
        monkeypatch.setattr(positions, "MIN_MEAN_RUN", value)
        searcher = MultiStepSearcher(model, index, policy=rules(model, lexical_depth=depth))
        got[name] = [as_tuples(h) for h in searcher.search(QUERIES, k=5)]
        got[name + "-one"] = as_tuples(searcher.search(QUERIES[:1], k=5)[0])
    for a, b in zip(got["runs"], got["copy"]):
        assert_same(a, b)
        assert np.allclose([q for _, _, q, _ in a], [q for _, _, q, _ in b], atol=1e-5)
    assert_same(got["runs-one"], got["copy-one"])


def short_documents_index(n: int = 40, per_doc: int = 4) -> ChunkIndex:
    """``n`` chunks in documents of ``per_doc``: a batch's relaid documents stay small."""
    index = ChunkIndex(32)
    texts = [f"fact {i} " + "the " * (i % 17) + "a " * (i // 17) for i in range(n)]
    emb = torch.randn(n, 32, generator=torch.Generator().manual_seed(5))
    index.add(texts, emb, ids=[f"c{i}" for i in range(n)], doc_ids=[i // per_doc for i in range(n)])
    return index


@pytest.mark.parametrize("mode", ["document-relative", "document-relative-anchored"])
def test_a_batch_shares_one_scan_outside_its_relaid_documents(
    make_model, way, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qrag_integrations.core import exact_scan

    model, index = make_model(mode), short_documents_index()
    calls = []
    real = exact_scan.relaid_top_k
    monkeypatch.setattr(exact_scan, "relaid_top_k", lambda *a: calls.append(a[-1]) or real(*a))
    for block_size in (3, 65536):
        searcher = MultiStepSearcher(model, index, SearchSettings(block_size=block_size))
        for query, hits in zip(QUERIES, searcher.search(QUERIES, k=4)):
            assert_same(as_tuples(hits), brute_force(model, index, query, 4))
    assert calls  # the shared scan ran
    for policy in (rules(model, lexical_depth=3), rules(model, supersede=True)):
        searcher = MultiStepSearcher(model, index, policy=policy)
        alone = [searcher.search([q], k=4)[0] for q in QUERIES]  # one question: its own scans
        for got, want in zip(searcher.search(QUERIES, k=4), alone):
            assert_same(as_tuples(got), as_tuples(want))
    assert max(calls) > 1  # the pools and fusion asked the shared scan for more than one


def test_one_long_relaid_document_per_question_is_scanned_per_question(make_model) -> None:
    model = make_model("document-relative")
    searcher = MultiStepSearcher(model, short_documents_index())
    got = searcher._searched.candidates(searcher.index.snapshot(), None)
    assert got.shares(model.config, [[0], [5], [9]])  # three documents of 4 of 40 chunks
    assert not got.shares(model.config, [[0]])  # one question: its own scan
    long = MultiStepSearcher(model, short_documents_index(per_doc=40))
    one = long._searched.candidates(long.index.snapshot(), None)
    assert not one.shares(model.config, [[0], [5]])  # each relays the whole index
