"""MultiStepSearcher against a brute-force loop of the paper's inference procedure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from search_reference import (
    MODES,
    QUERIES,
    TEXTS,
    N,
    as_tuples,
    assert_same,
    brute_force,
    random_index,
)

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.positions import layout
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("block_size", [3, 65536])
def test_matches_brute_force(make_model, mode: str, block_size: int) -> None:
    model = make_model(mode)
    index = random_index()
    searcher = MultiStepSearcher(model, index, SearchSettings(block_size=block_size))
    results = searcher.search(QUERIES, k=6)
    assert len(results) == len(QUERIES)
    for query, hits in zip(QUERIES, results):
        assert_same(as_tuples(hits), brute_force(model, index, query, 6))
        assert [h.step for h in hits] == [1, 2, 3, 4, 5, 6]
        assert all(isinstance(h.q_value, float) and isinstance(h.position, int) for h in hits)


def test_results_differ_between_position_modes(make_model) -> None:
    index = random_index()
    picks = {
        m: [h.chunk.id for h in MultiStepSearcher(make_model(m), index).search(QUERIES[:1], k=6)[0]]
        for m in ("relative", "absolute", "none")
    }
    assert len({tuple(p) for p in picks.values()}) > 1


def test_model_chunk_embeddings_match_brute_force(make_model) -> None:
    model = make_model("relative")
    index = ChunkIndex(32)
    index.add(TEXTS, model.embed_chunks(TEXTS), ids=[f"c{i}" for i in range(N)])
    results = MultiStepSearcher(model, index, SearchSettings(block_size=4)).search(QUERIES, k=4)
    for query, hits in zip(QUERIES, results):
        assert_same(as_tuples(hits), brute_force(model, index, query, 4))


def test_fp16_index_matches_brute_force_on_same_values(make_model) -> None:
    model = make_model("relative")
    index = random_index(dtype=torch.float16)
    hits = MultiStepSearcher(model, index, SearchSettings(block_size=5)).search(QUERIES[:2], k=5)
    for query, h in zip(QUERIES[:2], hits):
        assert_same(as_tuples(h), brute_force(model, index, query, 5))


def test_picks_distinct_and_k_beyond_corpus(make_model) -> None:
    for mode in ("relative", "absolute"):
        results = MultiStepSearcher(
            make_model(mode), random_index(), SearchSettings(block_size=3)
        ).search(QUERIES, k=50)
        for hits in results:
            ids = [h.chunk.id for h in hits]
            assert len(ids) == N and sorted(ids) == sorted(f"c{i}" for i in range(N))
            assert [h.step for h in hits] == list(range(1, N + 1))


def test_k_below_one_raises(make_model) -> None:
    searcher = MultiStepSearcher(make_model("relative"), random_index())
    for k in (0, -3):
        with pytest.raises(QRAGError, match="k must be >= 1"):
            searcher.search(QUERIES, k=k)


def test_empty_index_and_no_queries(make_model) -> None:
    searcher = MultiStepSearcher(make_model("relative"), ChunkIndex(32))
    assert searcher.search(QUERIES, k=3) == [[], [], []]
    assert MultiStepSearcher(make_model("relative"), random_index()).search([], k=3) == []


def test_dimension_mismatch(make_model) -> None:
    with pytest.raises(QRAGError, match="32 != index embedding size 16"):
        MultiStepSearcher(make_model("relative"), ChunkIndex(16))


def test_stop_threshold(make_model) -> None:
    model = make_model("relative")
    index = random_index()
    searcher = MultiStepSearcher(model, index, SearchSettings(block_size=3))
    assert searcher.search(QUERIES, k=5, stop_threshold=1e6) == [[], [], []]
    assert [len(h) for h in searcher.search(QUERIES, k=5, stop_threshold=-1e6)] == [5, 5, 5]
    # a threshold between two brute-force Q values stops exactly there
    bf = [brute_force(model, index, q, 6) for q in QUERIES]
    threshold = None
    for picks in bf:
        qs = [q for _, _, q, _ in picks]
        for j in range(1, len(qs)):
            if qs[j] < min(qs[:j]) - 1e-3:
                threshold = (qs[j] + min(qs[:j])) / 2
                break
        if threshold is not None:
            break
    assert threshold is not None
    results = searcher.search(QUERIES, k=6, stop_threshold=threshold)
    lengths = []
    for query, hits in zip(QUERIES, results):
        expected = brute_force(model, index, query, 6, threshold=threshold)
        assert_same(as_tuples(hits), expected)
        assert all(h.q_value >= threshold for h in hits)
        lengths.append(len(hits))
    assert any(0 < n < 6 for n in lengths)


def test_second_step_state_contains_first_pick(make_model, monkeypatch: pytest.MonkeyPatch) -> None:
    model = make_model("relative")
    index = random_index()
    seen: list[list[str]] = []
    original = model.embed_states

    def spy(texts):
        seen.append(list(texts))
        return original(texts)

    monkeypatch.setattr(model, "embed_states", spy)
    results = MultiStepSearcher(model, index).search(QUERIES, k=3)
    assert len(seen) == 3  # one batched state pass per step
    assert seen[0] == QUERIES
    for b, query in enumerate(QUERIES):
        first, second = results[b][0].chunk, results[b][1].chunk
        assert seen[1][b] == model.state_text(query, [first.text])
        assert first.text in seen[1][b]
        rank = {c.id: i for i, c in enumerate(index.snapshot().chunks)}
        expected_third = model.state_text(
            query, [first.text, second.text], [rank[first.id], rank[second.id]]
        )
        assert seen[2][b] == expected_third


def test_state_text_drives_later_picks(make_model, monkeypatch: pytest.MonkeyPatch) -> None:
    model = make_model("none")  # no positions: only the state text can change later picks
    index = random_index()
    normal = MultiStepSearcher(model, index).search(QUERIES, k=4)
    monkeypatch.setattr(model, "state_text", lambda question, picked, picked_order=None: question)
    blind = MultiStepSearcher(model, index).search(QUERIES, k=4)
    # step 1 is the same; later steps must change for at least one question
    assert [h[0].chunk.id for h in normal] == [h[0].chunk.id for h in blind]
    assert [[x.chunk.id for x in h] for h in normal] != [[x.chunk.id for x in h] for h in blind]


def test_filter_restricts_candidates_and_layout(make_model) -> None:
    for mode in ("relative", "absolute", "document"):
        model = make_model(mode)
        index = random_index()
        searcher = MultiStepSearcher(model, index, SearchSettings(block_size=2))
        rows = index.snapshot().rows_matching({"doc": "A"}).tolist()
        assert len(rows) == 8
        results = searcher.search(QUERIES, k=4, filter={"doc": "A"})
        for query, hits in zip(QUERIES, results):
            assert all(h.chunk.metadata["doc"] == "A" for h in hits)
            assert_same(as_tuples(hits), brute_force(model, index, query, 4, rows=rows))
        everything = searcher.search(QUERIES[:1], k=20, filter=lambda m: m["doc"] == "B")[0]
        assert sorted(h.chunk.id for h in everything) == sorted(
            f"c{i}" for i in range(N) if i % 3 == 0
        )
        assert searcher.search(QUERIES, k=3, filter={"doc": "Z"}) == [[], [], []]


def test_where_is_the_deprecated_name_of_filter(make_model) -> None:
    """One name for the metadata filter (``filter=``, as on the retriever); ``where=`` still works."""
    searcher = MultiStepSearcher(make_model("relative"), random_index())
    with pytest.warns(DeprecationWarning, match="use filter="):
        old = searcher.search(QUERIES, k=3, where={"doc": "A"})
    assert [as_tuples(h) for h in old] == [
        as_tuples(h) for h in searcher.search(QUERIES, k=3, filter={"doc": "A"})
    ]
    with pytest.raises(QRAGError, match="filter= only"):
        searcher.search(QUERIES, k=3, filter={"doc": "A"}, where={"doc": "B"})


@pytest.mark.parametrize("mode", ["relative", "absolute", "none"])
def test_faiss_preselection_with_all_candidates_is_exact(make_model, mode: str) -> None:
    model = make_model(mode)
    index = random_index()
    exact = MultiStepSearcher(model, index).search(QUERIES, k=5)
    for cands in (N, N + 7):
        approx = MultiStepSearcher(
            model, index, SearchSettings(faiss_candidates=cands, faiss_min_size=0)
        ).search(QUERIES, k=5)
        for a, e in zip(approx, exact):
            assert_same(as_tuples(a), as_tuples(e))


def test_faiss_bypassed_for_small_index_and_filters(make_model) -> None:
    model = make_model("relative")
    index = random_index()
    exact = MultiStepSearcher(model, index).search(QUERIES, k=4)
    small = MultiStepSearcher(
        model, index, SearchSettings(faiss_candidates=1, faiss_min_size=N + 1)
    ).search(QUERIES, k=4)
    assert [as_tuples(h) for h in small] == [as_tuples(h) for h in exact]
    filtered_exact = MultiStepSearcher(model, index).search(QUERIES, k=4, filter={"doc": "A"})
    filtered = MultiStepSearcher(
        model, index, SearchSettings(faiss_candidates=1, faiss_min_size=0)
    ).search(QUERIES, k=4, filter={"doc": "A"})
    assert [as_tuples(h) for h in filtered] == [as_tuples(h) for h in filtered_exact]


def test_faiss_with_few_candidates_returns_valid_distinct_picks(make_model) -> None:
    model = make_model("relative")
    index = random_index()
    results = MultiStepSearcher(
        model, index, SearchSettings(faiss_candidates=2, faiss_min_size=0)
    ).search(QUERIES, k=N)
    for hits in results:
        assert sorted(h.chunk.id for h in hits) == sorted(f"c{i}" for i in range(N))


def test_searcher_sees_index_updates(make_model) -> None:
    model = make_model("none")
    index = random_index()
    with torch.no_grad():
        state = model.embed_states([QUERIES[0]])[0]
    for settings in (SearchSettings(), SearchSettings(faiss_candidates=3, faiss_min_size=0)):
        searcher = MultiStepSearcher(model, index, settings)
        first = searcher.search(QUERIES[:1], k=1)[0][0].chunk.id
        index.add(
            ["the answer"], (state * 100).unsqueeze(0), ids=[f"best-{id(settings)}"], doc_ids=["d"]
        )
        assert searcher.search(QUERIES[:1], k=1)[0][0].chunk.id == f"best-{id(settings)}"
        index.delete([f"best-{id(settings)}"])
        assert searcher.search(QUERIES[:1], k=1)[0][0].chunk.id == first


def test_hit_positions_follow_relative_layout(make_model) -> None:
    model = make_model("relative")
    index = random_index()
    hits = MultiStepSearcher(model, index).search(QUERIES[:1], k=5)[0]
    rank = {c.id: i for i, c in enumerate(index.snapshot().chunks)}
    picked: list[int] = []
    for h in hits:
        expected = layout(PositionMode.RELATIVE, N, picked, 20, 0.9)[rank[h.chunk.id]]
        assert h.position == int(expected)
        picked.append(rank[h.chunk.id])
    assert hits[0].position == int(np.linspace(0, 18, N)[rank[hits[0].chunk.id]] + 1e-9)


def test_untrained_step_one_is_dense_top_one(tiny_bert_dir: Path) -> None:
    """With no Q-RAG training (the default config), the first pick is single-step dense top-1:
    the chunk with the highest cosine between mean-pooled question and chunk embeddings."""
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()
    texts = [
        f"{w} went to the {p}"
        for w in ("mary", "john", "sandra", "daniel")
        for p in ("kitchen", "garden", "office")
    ]
    index = ChunkIndex(32)
    index.add(texts, model.embed_chunks(texts), ids=[str(i) for i in range(len(texts))])
    queries = ["where is mary", "who went to the garden", "what did john give to sandra", "office"]
    hits = MultiStepSearcher(model, index).search(queries, k=3)
    tok = model.tokenizer
    for query, row in zip(queries, hits):
        with torch.no_grad():

            def pooled(text: str) -> torch.Tensor:
                batch = tok([text], return_tensors="pt")
                return model.state_encoder.model(**batch).last_hidden_state[0].mean(0)

            q = pooled(query)
            cos = torch.stack(
                [torch.nn.functional.cosine_similarity(q, pooled(t), dim=0) for t in texts]
            )
        assert row[0].chunk.id == str(int(cos.argmax()))
        assert row[0].q_value == pytest.approx(float(cos.max()), abs=1e-5)
        assert len({h.chunk.id for h in row}) == 3
