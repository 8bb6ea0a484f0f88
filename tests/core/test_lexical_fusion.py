"""Lexical fusion (``lexical_depth``): the search against a brute-force loop of its definition."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
import torch
from search_reference import as_tuples, assert_same, brute_force, rules, step_q_values

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.rules import RRF_C
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings
from qrag_integrations.core.stopwords import ENGLISH_STOP_WORDS

WORDS = ["apple", "river", "garden", "kitchen", "football", "office", "milk", "castle"]
TEXTS = [f"{WORDS[i % 8]} {WORDS[(3 * i + 1) % 8]} note {i}" for i in range(24)]
QUERIES = ["where is the football", "apple garden", "castle milk river", "nothing matches"]


def word_index() -> ChunkIndex:
    index = ChunkIndex(32)
    g = torch.Generator().manual_seed(5)
    metas = [{"doc": "A" if i % 3 else "B"} for i in range(len(TEXTS))]
    ids = [f"w{i}" for i in range(len(TEXTS))]
    index.add(TEXTS, torch.randn(len(TEXTS), 32, generator=g), metadatas=metas, ids=ids)
    return index


def terms(text: str) -> set[str]:
    return set(bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0])


def reference(
    model, index, query, k, depth, rows=None, steps=None, gap=None, gaps=None, weight=0.0
):
    """Per step: exact Q of every candidate at its layout position, the BM25 ranking of the
    question, reciprocal rank fusion of the top ``depth`` of each (ties: Q order); after
    ``steps`` steps (``None``: never), the best by Q alone, unless a ``gap`` is given and Q's two
    best untaken lie closer than it (each later step's gap is appended to ``gaps``): then the
    BM25 ranking counts only chunks that name a question term (not a stop word) no pick names.
    With a ``weight``, the fused pick is instead the best of Q's ``depth`` best by
    ``Q + weight * BM25 / the question's best BM25`` (BM25 0 for a chunk the ranking leaves out)."""
    snap = index.snapshot()
    rows = list(range(len(snap))) if rows is None else rows
    texts = [snap.chunks[r].text for r in rows]
    emb = snap.embeddings[rows].float()
    bm = bm25s.BM25()
    bm.index(bm25s.tokenize([c.text for c in snap.chunks], stopwords="en", show_progress=False))
    tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
    scores = np.asarray(bm.get_scores(tokens))[rows]
    lexical = [int(r) for r in np.argsort(-scores, kind="stable") if scores[r] > 0]
    n, picked, out = len(rows), [], []
    for step in range(1, min(k, n) + 1):
        q, pos = step_q_values(model, query, texts, emb, picked)
        order = [int(r) for r in torch.argsort(q, descending=True, stable=True)]
        untaken = [r for r in order if r not in picked]
        later_gap = float(q[untaken[0]] - q[untaken[1]]) if len(untaken) > 1 else float("inf")
        if steps is not None and step > steps and gaps is not None:
            gaps.append(later_gap)
        if steps is not None and step > steps and (gap is None or later_gap >= gap):
            best = untaken[0]
            out.append((snap.chunks[rows[best]].id, step, float(q[best]), int(pos[best])))
            picked.append(best)
            continue
        dense = [r for r in order if r not in picked][:depth]
        words = [r for r in lexical if r not in picked]
        if steps is not None and step > steps:  # unsure: chunks naming a term no pick names
            rest = terms(query).difference(ENGLISH_STOP_WORDS, *(terms(texts[r]) for r in picked))
            words = [r for r in words if terms(texts[r]) & rest]
        if weight:
            top = float(scores.max(initial=0.0))
            named = set(words)
            by = [float(q[r]) + (weight * scores[r] / top if r in named else 0.0) for r in dense]
            best = dense[max(range(len(dense)), key=by.__getitem__)] if top > 0 else dense[0]
            out.append((snap.chunks[rows[best]].id, step, float(q[best]), int(pos[best])))
            picked.append(best)
            continue
        words = words[:depth]
        fused: dict[int, float] = {}
        for ranking in (dense, words):
            for i, r in enumerate(ranking):
                fused[r] = fused.get(r, 0.0) + 1.0 / (RRF_C + i + 1)
        best = max(fused, key=fused.__getitem__)
        assert best in dense  # what only BM25 ranks never outscores Q's best (rules.py)
        out.append((snap.chunks[rows[best]].id, step, float(q[best]), int(pos[best])))
        picked.append(best)
    return out


@pytest.mark.parametrize("mode", ["none", "none-anchored", "relative", "absolute"])
@pytest.mark.parametrize("depth", [1, 3, 50])
def test_matches_the_reference(make_model, mode: str, depth: int) -> None:
    model = make_model(mode)
    index = word_index()
    searcher = MultiStepSearcher(model, index, policy=rules(model, lexical_depth=depth))
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=5)):
        assert_same(as_tuples(hits), reference(model, index, query, 5, depth))


@pytest.mark.parametrize("mode", ["none-anchored", "relative", "absolute"])
@pytest.mark.parametrize("weight", [0.05, 0.5, 100.0])
@pytest.mark.parametrize("later", [None, (1, 0.0), (1, 10.0)])
def test_fusion_by_score_matches_the_reference(make_model, mode, weight, later) -> None:
    """``lexical_weight``: every step fusing, or the first only and later ones never / always
    (a gap nothing reaches), against the brute-force loop, filtered and not."""
    model = make_model(mode)
    index = word_index()
    steps, gap = later or (None, None)
    policy = rules(
        model, lexical_depth=4, lexical_steps=steps, lexical_gap=gap, lexical_weight=weight
    )
    searcher = MultiStepSearcher(model, index, policy=policy)
    rows = [i for i in range(len(TEXTS)) if i % 3]
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=5)):
        assert_same(
            as_tuples(hits),
            reference(model, index, query, 5, 4, steps=steps, gap=gap or None, weight=weight),
        )
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=5, filter={"doc": "A"})):
        want = reference(model, index, query, 5, 4, rows, steps, gap or None, weight=weight)
        assert_same(as_tuples(hits), want)


def test_a_large_weight_puts_bm25s_best_first(make_model) -> None:
    """At a weight no Q gap outweighs and a pool of every chunk, the first pick is BM25's best;
    a checkpoint's weight applies unless the settings say otherwise."""
    model = make_model("none-anchored")
    index = word_index()
    bm = bm25s.BM25()
    bm.index(bm25s.tokenize(TEXTS, stopwords="en", show_progress=False))
    policy = rules(model, lexical_depth=len(TEXTS), lexical_steps=1, lexical_weight=1e6)
    searcher = MultiStepSearcher(model, index, policy=policy)
    for query, hits in zip(QUERIES[:3], searcher.search(QUERIES[:3], k=1)):
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        scores = np.asarray(bm.get_scores(tokens))
        assert scores[int(hits[0].chunk.id[1:])] == scores.max() > 0
    assert SearchPolicy.of(QRAGConfig(lexical_weight=0.4)).lexical_weight == 0.4
    assert SearchPolicy.of(QRAGConfig(lexical_weight=0.4), lexical_weight=0).lexical_weight == 0


def test_bad_weights_name_the_problem() -> None:
    for bad in (-0.1, float("nan"), "0.3", True):
        with pytest.raises(QRAGError, match="lexical_weight"):
            SearchPolicy(lexical_weight=bad)  # type: ignore[arg-type]
        with pytest.raises(QRAGError, match="lexical_weight"):
            SearchPolicy.of(QRAGConfig(), lexical_weight=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lexical_weight"):
        QRAGConfig(lexical_weight=-1.0)


def test_the_lexical_signal_changes_picks_and_no_match_is_the_plain_search(make_model) -> None:
    model = make_model("none")
    index = word_index()
    fused = MultiStepSearcher(model, index, policy=rules(model, lexical_depth=3)).search(
        QUERIES, k=3
    )
    plain = MultiStepSearcher(model, index).search(QUERIES, k=3)
    assert [as_tuples(h) for h in fused[:3]] != [as_tuples(h) for h in plain[:3]]
    assert_same(as_tuples(fused[3]), brute_force(model, index, QUERIES[3], 3))


def test_filters_restrict_both_rankings(make_model) -> None:
    model = make_model("relative")
    index = word_index()
    rows = [i for i in range(len(TEXTS)) if i % 3]
    searcher = MultiStepSearcher(model, index, policy=rules(model, lexical_depth=4))
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=4, filter={"doc": "A"})):
        assert_same(as_tuples(hits), reference(model, index, query, 4, 4, rows=rows))


def test_each_index_of_search_each_has_its_own_words(make_model) -> None:
    model = make_model("none")
    a, b = word_index(), ChunkIndex(32)
    b.add(TEXTS[:6], torch.randn(6, 32), ids=[f"x{i}" for i in range(6)])
    searcher = MultiStepSearcher(model, a, policy=rules(model, lexical_depth=2))
    got = searcher.search_each(QUERIES[:2], [a, b], k=2)
    assert_same(as_tuples(got[0]), reference(model, a, QUERIES[0], 2, 2))
    assert_same(as_tuples(got[1]), reference(model, b, QUERIES[1], 2, 2))


@pytest.mark.parametrize("mode", ["none", "relative"])
@pytest.mark.parametrize("where", ["settings", "model"])
def test_fusion_can_stop_after_the_first_steps(
    make_model, mode: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(mode)
    index = word_index()
    if where == "model":
        monkeypatch.setattr(model.config, "lexical_steps", 1)  # the model is shared
    policy = rules(model, lexical_depth=3, lexical_steps=1 if where == "settings" else None)
    got = MultiStepSearcher(model, index, policy=policy).search(QUERIES, k=4)
    for query, hits in zip(QUERIES, got):
        assert_same(as_tuples(hits), reference(model, index, query, 4, 3, steps=1))
    every_step = [reference(model, index, q, 4, 3) for q in QUERIES]
    assert [as_tuples(h) for h in got] != every_step  # the later steps are not fused


@pytest.mark.parametrize("mode", ["none", "relative"])
@pytest.mark.parametrize("where", ["settings", "model"])
def test_later_steps_fuse_where_q_is_unsure(
    make_model, mode: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(mode)
    index = word_index()
    gaps: list[float] = []
    for q in QUERIES:
        reference(model, index, q, 5, 3, steps=1, gap=0.0, gaps=gaps)
    gap = float(np.median(gaps))  # about half the later steps each way
    if where == "model":
        monkeypatch.setattr(model.config, "lexical_steps", 1)  # the model is shared
        monkeypatch.setattr(model.config, "lexical_gap", gap)
        policy = rules(model, lexical_depth=3)
    else:
        policy = rules(model, lexical_depth=3, lexical_steps=1, lexical_gap=gap)
    got = MultiStepSearcher(model, index, policy=policy).search(QUERIES, k=5)
    for query, hits in zip(QUERIES, got):
        assert_same(as_tuples(hits), reference(model, index, query, 5, 3, steps=1, gap=gap))
    first_only = [reference(model, index, q, 5, 3, steps=1) for q in QUERIES]
    every_step = [reference(model, index, q, 5, 3) for q in QUERIES]
    assert [as_tuples(h) for h in got] not in (first_only, every_step)
    # a gap of 0 in the settings turns the model's off: fusion in the first steps only
    off = rules(model, lexical_depth=3, lexical_steps=1, lexical_gap=0)
    for hits, want in zip(
        MultiStepSearcher(model, index, policy=off).search(QUERIES, k=5), first_only
    ):
        assert_same(as_tuples(hits), want)


def test_bad_gaps_name_the_problem() -> None:
    for bad in (-0.1, "0.1", True, float("nan")):
        with pytest.raises(QRAGError, match="lexical_gap"):
            SearchPolicy(lexical_gap=bad)  # type: ignore[arg-type]
        with pytest.raises(QRAGError, match="lexical_gap"):
            SearchPolicy.of(QRAGConfig(), lexical_gap=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lexical_gap"):
        QRAGConfig(lexical_gap=-1.0)


def test_bad_steps_name_the_problem() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(QRAGError, match="lexical_steps"):
            SearchPolicy(lexical_steps=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lexical_steps"):
        QRAGConfig(lexical_steps=0)


def test_bad_depth_names_the_problem() -> None:
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(QRAGError, match="lexical_depth"):
            SearchPolicy(lexical_depth=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lexical_depth"):
        QRAGConfig(lexical_depth=0)


@pytest.mark.parametrize("mode", ["none", "relative"])
def test_the_models_own_depth_applies_unless_the_settings_say_otherwise(
    make_model, mode, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(mode)
    monkeypatch.setattr(model.config, "lexical_depth", 3)  # the model is shared
    index = word_index()
    own = MultiStepSearcher(model, index).search(QUERIES, k=4)
    for query, hits in zip(QUERIES, own):
        assert_same(as_tuples(hits), reference(model, index, query, 4, 3))
    deeper = MultiStepSearcher(model, index, policy=rules(model, lexical_depth=50)).search(
        QUERIES, k=4
    )
    for query, hits in zip(QUERIES, deeper):
        assert_same(as_tuples(hits), reference(model, index, query, 4, 50))
    off = MultiStepSearcher(model, index, policy=rules(model, lexical_depth=0)).search(QUERIES, k=4)
    for query, hits in zip(QUERIES, off):
        assert_same(as_tuples(hits), brute_force(model, index, query, 4))


@pytest.mark.parametrize("scan", ["int8", "binary"])
def test_the_models_own_depth_applies_with_compact_scans(
    make_model, monkeypatch: pytest.MonkeyPatch, scan: str
) -> None:
    """The fused steps read Q's best from the compact copy's candidates re-scored exactly: where
    those hold every chunk, the picks are the exact fused search's (never silently unfused)."""
    model = make_model("none")
    monkeypatch.setattr(model.config, "lexical_depth", 3)  # the model is shared
    index = word_index()
    settings = SearchSettings(scan=scan, rescore=len(TEXTS))
    got = MultiStepSearcher(model, index, settings).search(QUERIES, k=3)
    for query, hits in zip(QUERIES, got):
        assert_same(as_tuples(hits), reference(model, index, query, 3, 3))


@pytest.mark.parametrize("mode", ["none", "relative"])
def test_the_models_own_depth_applies_with_a_bf16_batch_scan(
    make_model, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bf16 copy serves batches only; a lone question is scanned exactly, and both get the
    model's own fusion (its fused steps rank by exact Q)."""
    model = make_model(mode)
    monkeypatch.setattr(model.config, "lexical_depth", 3)  # the model is shared
    monkeypatch.setattr(model.config, "lexical_steps", 1)
    index = word_index()
    searcher = MultiStepSearcher(model, index, SearchSettings(scan="bf16", rescore=len(TEXTS)))
    alone = [searcher.search([q], k=4)[0] for q in QUERIES]
    for query, hits in zip(QUERIES, alone):
        assert_same(as_tuples(hits), reference(model, index, query, 4, 3, steps=1))
    # a batch: the fused step by exact Q, later steps by the bf16 copy re-scored (here all rows)
    for query, hits in zip(QUERIES, searcher.search(QUERIES, k=4)):
        assert_same(as_tuples(hits), reference(model, index, query, 4, 3, steps=1))


def test_bm25s_is_quiet_and_its_absence_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging
    import sys

    from qrag_integrations.core import rules

    rules._bm25s.cache_clear()
    logging.getLogger("bm25s").setLevel(logging.DEBUG)  # what importing bm25s does
    rules._bm25s()
    assert logging.getLogger("bm25s").level == logging.WARNING  # no line per index built
    rules._bm25s.cache_clear()
    monkeypatch.setitem(sys.modules, "bm25s", None)
    with pytest.raises(QRAGError, match=r"pip install 'qrag-integrations\[lexical\]'"):
        rules._bm25s()
    monkeypatch.undo()
    rules._bm25s.cache_clear()


@pytest.mark.parametrize("mode", ["none", "none-anchored", "relative", "absolute"])
@pytest.mark.parametrize("block", [5, 4096])
def test_a_batch_scans_its_fused_steps_once_with_the_same_picks(
    make_model, mode: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's fused steps rank by Q in one pass over the index (blocks merged); each question
    gets the picks of the definition, as when searched alone."""
    from qrag_integrations.core.exact_scan import ExactScorer

    model = make_model(mode)
    index = word_index()
    settings = SearchSettings(block_size=block)
    calls = []
    shared = ExactScorer.top_shared
    monkeypatch.setattr(ExactScorer, "top_shared", lambda *a: calls.append(shared(*a)) or calls[-1])
    fused = rules(model, lexical_depth=3)
    together = MultiStepSearcher(model, index, settings, fused).search(QUERIES, k=4)
    for query, hits in zip(QUERIES, together):
        assert_same(as_tuples(hits), reference(model, index, query, 4, 3))
    # the first step always shares one layout; without positions every step does
    served = [c for c in calls if c is not None]
    assert len(served) == (0 if mode == "absolute" else 4 if mode.startswith("none") else 1)


def test_a_limited_bm25_ranking_is_the_head_of_the_full_one() -> None:
    """Ties at the cut (many chunks share a word) keep the full stable sort's order."""
    from qrag_integrations.core.index import IndexCandidates
    from qrag_integrations.core.rules import LexicalRanker

    texts = [f"apple note {i}" for i in range(10)] + ["apple apple river", "river"] * 3
    index = ChunkIndex(4)
    index.add(texts, torch.randn(len(texts), 4, generator=torch.Generator().manual_seed(0)))
    cands = IndexCandidates.of(index.snapshot(), None)
    ranker = LexicalRanker()
    for query in ("apple", "river apple", "apple note 3"):
        full = ranker.ranking(cands, query)
        assert len(full) > 3
        for limit in (1, 2, 3, 7, len(full), len(full) + 5):
            assert ranker.ranking(cands, query, limit).tolist() == full[:limit].tolist()


def test_novel_terms_leave_out_what_the_picks_name_and_stop_words() -> None:
    """A later step's filter: chunks naming a question term that is neither a stop word nor named
    by a pick, in the ranking's order; none once no such term is left."""
    from qrag_integrations.core.index import IndexCandidates
    from qrag_integrations.core.rules import LexicalRanker

    texts = [
        "the milk is in the office",  # 0
        "milk before noon",  # 1: names "before", a stop word bm25s's list keeps
        "the office where John went",  # 2
        "a garden of milk",  # 3
        "nothing here",  # 4
    ]
    index = ChunkIndex(4)
    index.add(texts, torch.randn(len(texts), 4, generator=torch.Generator().manual_seed(0)))
    cands = IndexCandidates.of(index.snapshot(), None)
    ranker = LexicalRanker()
    question = "Where was the milk before the office?"
    ranking = ranker.ranking(cands, question)
    assert {"where", "before"} <= terms(question)  # bm25s keeps them; the filter must not
    assert ranker.novel(cands, question, [0]).tolist() == []  # milk and office named
    assert ranker.novel(cands, question, [3]).tolist() == [
        r for r in ranking.tolist() if r in (0, 2)
    ]  # milk named: chunks naming "office"
    assert ranker.novel(cands, question, []).tolist() == [r for r in ranking.tolist() if r != 4]


def test_stop_words_are_scikit_learns() -> None:
    """The frozen copy equals scikit-learn's list (a test dependency, not the package's)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as SKLEARN

    assert ENGLISH_STOP_WORDS == SKLEARN
