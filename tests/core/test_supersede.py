"""Later restatements supersede picks (``supersede_margin``): the search against a brute-force loop
of its definition, and the switches."""

from __future__ import annotations

import bm25s
import pytest
import torch
from search_reference import (
    as_tuples,
    assert_same,
    brute_force,
    rules,
    searched_chunks,
    step_q_values,
    with_config,
)

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.exact_scan import ExactScorer
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import DEFAULT_MARGIN
from qrag_integrations.core.rules import POOL
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings

PEOPLE = ["mary", "john", "sandra", "daniel"]
PLACES = ["kitchen", "garden", "office", "hallway", "bathroom"]
TEXTS = [f"{PEOPLE[i % 4]} went to the {PLACES[(2 * i) % 5]}" for i in range(20)]
DOCS = ["story" if i < 14 else "other" for i in range(20)]
QUERIES = ["where is mary", "where is john", "where is daniel the hallway", "nothing"]


def story_index() -> ChunkIndex:
    index = ChunkIndex(32)
    emb = torch.randn(len(TEXTS), 32, generator=torch.Generator().manual_seed(3))
    index.add(TEXTS, emb, ids=[f"s{i}" for i in range(len(TEXTS))], doc_ids=DOCS)
    return index


def with_rule(model: QRAGModel, margin: float | None, similarity: float) -> QRAGModel:
    """The same weights under a config with these supersede settings (search reads the config)."""
    return with_config(model, supersede_margin=margin, supersede_similarity=similarity)


def tokens(text: str) -> list[str]:
    return bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]


def terms(text: str) -> set[str]:
    return set(tokens(text))


def named_in_order(text: str, shared: set[str]) -> list[str]:
    out: list[str] = []
    for token in tokens(text):
        if token in shared and token not in out:
            out.append(token)
    return out


def reference(
    model: QRAGModel, index: ChunkIndex, query: str, k: int, margin: float, deliberate: bool = True
):
    """Per step: the arg-max by exact Q, then the latest chunk of its document after it among Q's
    POOL best untaken with Q within ``margin``, cosine >= the config's similarity and every term
    the pick shares with the state text in the pick's order, and (``deliberate``) before any taken
    chunk that meets the last two conditions."""
    cfg = model.config
    chunks, emb, fixed = searched_chunks(model, index)
    plain = index.snapshot().embeddings.float()
    texts = [c.text for c in chunks]
    unit = torch.nn.functional.normalize(plain, dim=-1)
    picked: list[int] = []
    out = []
    for step in range(1, min(k, len(chunks)) + 1):
        q, pos = step_q_values(model, query, texts, emb, picked)
        best = int(q.argmax())
        state_text = model.state_text(query, [texts[r] for r in picked], picked_order=picked)
        shared = terms(state_text) & terms(texts[best])
        pool = torch.topk(q, min(POOL, len(chunks) - len(picked))).indices.tolist()

        def restates(r: int, best: int = best, shared: set[str] = shared) -> bool:
            return (
                chunks[r].doc_id == chunks[best].doc_id
                and float(unit[r] @ unit[best]) >= cfg.supersede_similarity
                and named_in_order(texts[r], shared) == named_in_order(texts[best], shared)
            )

        taken = [r for r in picked if deliberate and r > best and restates(r)]
        later = [
            r
            for r in pool
            if shared
            and best < r < min(taken, default=len(chunks))
            and float(q[r]) >= float(q[best]) - margin
            and restates(r)
        ]
        best = max(later, default=best)
        where = pos if fixed is None else fixed
        out.append((chunks[best].id, step, float(q[best]), int(where[best])))
        picked.append(best)
    return out


@pytest.mark.parametrize("mode", ["none", "relative", "document", "document-anchored"])
@pytest.mark.parametrize(("margin", "similarity"), [(0.05, 0.8), (1e6, -1.0), (0.5, 0.0)])
def test_matches_the_reference(make_model, mode: str, margin: float, similarity: float) -> None:
    model = with_rule(make_model(mode), margin, similarity)
    index = story_index()
    hits = MultiStepSearcher(model, index).search(QUERIES, k=4)
    for query, got in zip(QUERIES, hits):
        assert_same(as_tuples(got), reference(model, index, query, 4, margin))


def test_a_restated_pick_becomes_its_latest_restatement(make_model) -> None:
    # any margin and similarity: whichever line the policy picks first, it names mary, so the
    # last line of the story about mary replaces it; the other document's line does not
    texts = [f"mary went to the {p}" for p in PLACES] + ["mary went to the cinema"]
    index = ChunkIndex(32)
    emb = torch.randn(len(texts), 32, generator=torch.Generator().manual_seed(4))
    ids = [f"m{i}" for i in range(len(texts))]
    index.add(texts, emb, ids=ids, doc_ids=["story"] * 5 + ["news"])
    model = with_rule(make_model("document"), 1e6, -1.0)
    plain = MultiStepSearcher(make_model("document"), index).search(["where is mary"], k=1)[0]
    hit = MultiStepSearcher(model, index).search(["where is mary"], k=1)[0][0]
    assert hit.chunk.id == ("m5" if plain[0].chunk.id == "m5" else "m4")


def test_a_line_with_the_roles_swapped_does_not_restate(make_model) -> None:
    # the last line holds every term of the first but names fred and ball in another order
    texts = [
        "fred gave the ball to jeff",
        "fred passed the ball to mary",
        "jeff gave the ball to fred",
    ]
    index = ChunkIndex(32)
    emb = torch.randn(3, 32, generator=torch.Generator().manual_seed(5))
    index.add(texts, emb, ids=["g0", "g1", "g2"], doc_ids=["story"] * 3)
    query = ["who did fred give the ball to"]
    plain = MultiStepSearcher(make_model("none"), index).search(query, k=1)[0][0].chunk.id
    model = with_rule(make_model("none"), 1e6, -1.0)
    hit = MultiStepSearcher(model, index).search(query, k=1)[0][0]
    assert plain == "g0"  # this seed's policy picks the first line, so the rule has a choice
    assert hit.chunk.id == "g1"


def test_off_without_a_margin_and_switched_by_the_settings(make_model) -> None:
    base = make_model("document")
    index = story_index()
    plain = [as_tuples(h) for h in MultiStepSearcher(base, index).search(QUERIES, k=3)]
    assert plain == [
        as_tuples(h)
        for h in MultiStepSearcher(base, index, policy=rules(base, supersede=False)).search(
            QUERIES, k=3
        )
    ]
    for query, got in zip(QUERIES, plain):
        assert_same(got, brute_force(base, index, query, 3))
    ruled = with_rule(base, 1e6, -1.0)
    off = MultiStepSearcher(ruled, index, policy=rules(ruled, supersede=False)).search(QUERIES, k=3)
    assert [as_tuples(h) for h in off] == plain
    on = MultiStepSearcher(base, index, policy=rules(base, supersede=True)).search(QUERIES, k=3)
    default_rule = with_rule(base, DEFAULT_MARGIN, base.config.supersede_similarity)
    for query, got in zip(QUERIES, on):
        assert_same(as_tuples(got), reference(default_rule, index, query, 3, DEFAULT_MARGIN))


def test_a_taken_restatement_keeps_later_ones_from_replacing_an_earlier_pick(make_model) -> None:
    # "where was X before Y": once the later line is taken, an earlier pick is deliberate
    model = with_rule(make_model("none"), 1e6, -1.0)
    index = story_index()
    got = [as_tuples(h) for h in MultiStepSearcher(model, index).search(QUERIES, k=4)]
    for query, hits in zip(QUERIES, got):
        assert_same(hits, reference(model, index, query, 4, 1e6))
    ignoring = [reference(model, index, query, 4, 1e6, deliberate=False) for query in QUERIES]
    assert [[h[0] for h in hits] for hits in got] != [[h[0] for h in r] for r in ignoring]


def test_the_rule_changes_picks(make_model) -> None:
    base = make_model("none")
    index = story_index()
    plain = MultiStepSearcher(base, index).search(QUERIES, k=3)
    ruled = MultiStepSearcher(with_rule(base, 1e6, -1.0), index).search(QUERIES, k=3)
    assert [as_tuples(h) for h in ruled] != [as_tuples(h) for h in plain]


def test_explicitly_on_with_a_compact_scan(make_model) -> None:
    base = make_model("none")
    index = story_index()
    compact = SearchSettings(scan="int8", rescore=400)
    got = MultiStepSearcher(base, index, compact, rules(base, supersede=True)).search(QUERIES, k=3)
    rule = with_rule(base, DEFAULT_MARGIN, base.config.supersede_similarity)
    for query, hits in zip(QUERIES, got):
        assert_same(as_tuples(hits), reference(rule, index, query, 3, DEFAULT_MARGIN))
    with pytest.raises(QRAGError, match="supersede must be True, False or None"):
        rules(base, supersede="yes")


def test_applied_on_every_in_memory_path(make_model) -> None:
    """The model's rule runs with a compact scan and FAISS pre-selection too (its pool from their
    candidates re-scored exactly): where those hold every chunk, the picks are the exact
    search's, and they differ from the search without the rule."""
    base = make_model("none")
    ruled = with_rule(base, 1e6, -1.0)
    index = story_index()
    exact = [as_tuples(h) for h in MultiStepSearcher(ruled, index).search(QUERIES, k=2)]
    for settings in (
        SearchSettings(scan="int8", rescore=400),
        SearchSettings(scan="binary", rescore=400),
        SearchSettings(faiss_candidates=len(index), faiss_min_size=1),
    ):
        got = MultiStepSearcher(ruled, index, settings).search(QUERIES, k=2)
        plain = MultiStepSearcher(base, index, settings).search(QUERIES, k=2)
        for hits, want in zip(got, exact):
            assert_same(as_tuples(hits), want)
        assert [[h.chunk.id for h in hits] for hits in plain] != [[i for i, *_ in w] for w in exact]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("supersede_margin", -0.1, "supersede_margin must be None or >= 0"),
        ("supersede_margin", True, "supersede_margin must be None or >= 0"),
        ("supersede_similarity", 1.5, r"supersede_similarity must be in \[-1, 1\]"),
    ],
)
def test_bad_settings_are_named(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        QRAGConfig(**{field: value})


def test_saved_configs_without_the_fields_load_with_the_rule_off() -> None:
    data = QRAGConfig().to_dict()
    del data["supersede_margin"], data["supersede_similarity"]
    loaded = QRAGConfig.from_dict(data)
    assert loaded.supersede_margin is None and loaded.supersede_similarity == 0.8


def test_the_rule_adds_no_scan_of_its_own(make_model, monkeypatch) -> None:
    # the step's one exact scan keeps Q's POOL best: the pick is its best, the rule reads the rest
    model = with_rule(make_model("document"), 1e6, -1.0)
    index = story_index()

    def not_called(*args, **kwargs):
        raise AssertionError("a second scan of the step")

    one, batch = [], []
    real_one, real_batch = ExactScorer.top, ExactScorer.top_k
    monkeypatch.setattr(ExactScorer, "top", lambda *a: one.append(a[-1]) or real_one(*a))
    monkeypatch.setattr(ExactScorer, "top_k", lambda *a: batch.append(a[-1]) or real_batch(*a))
    monkeypatch.setattr(ExactScorer, "best_one", not_called)
    monkeypatch.setattr(ExactScorer, "best_shared", not_called)
    hits = MultiStepSearcher(model, index).search(QUERIES[:1], k=3)[0]
    assert one == [POOL] * 3 and batch == []
    assert_same(as_tuples(hits), reference(model, index, QUERIES[0], 3, 1e6))
    one.clear()
    got = MultiStepSearcher(model, index).search(QUERIES, k=3)  # document mode: one layout
    assert one == [] and batch == [POOL] * 3
    for query, hits in zip(QUERIES, got):
        assert_same(as_tuples(hits), reference(model, index, query, 3, 1e6))
