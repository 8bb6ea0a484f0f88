"""Corpus management of ``QRAGRetriever``: incremental adds, deletes, ids."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document as LCDocument
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS, build_retriever, chunk_ids

from qrag_integrations import QRAGError, QRAGRetriever

QUESTIONS = list(BABI_QUESTIONS[:3])
TEXTS = list(BABI_TEXTS)
IDS = chunk_ids(TEXTS)
METAS = [{"n": i} for i in range(len(TEXTS))]


def results(r: QRAGRetriever, k: int = 4) -> list[list[tuple[str, str, int, int]]]:
    return [
        [
            (d.id, d.page_content, d.metadata["qrag_step"], d.metadata["qrag_position"])
            for d in r.invoke(q, k=k)
        ]
        for q in QUESTIONS
    ]


def qs(r: QRAGRetriever, k: int = 4) -> list[list[float]]:
    return [[d.metadata["qrag_q_value"] for d in r.invoke(q, k=k)] for q in QUESTIONS]


def assert_equivalent(a: QRAGRetriever, b: QRAGRetriever, k: int = 4) -> None:
    assert a.index.ids == b.index.ids
    assert [c.text for c in a.index.snapshot().chunks] == [
        c.text for c in b.index.snapshot().chunks
    ]
    assert results(a, k) == results(b, k)
    for x, y in zip(qs(a, k), qs(b, k)):
        assert x == pytest.approx(y, rel=1e-5, abs=1e-6)


@pytest.fixture
def make(tiny_bert_dir):
    def build(texts=(), **kwargs: Any) -> QRAGRetriever:
        kwargs.setdefault("k", 4)
        return build_retriever(tiny_bert_dir, texts, **kwargs)

    return build


def spy_embed(r: QRAGRetriever, monkeypatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real = r.model.embed_chunks

    def spy(texts, *args: Any, **kwargs: Any):
        calls.append(list(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(r.model, "embed_chunks", spy)
    return calls


def test_add_texts_embeds_only_new_chunks_and_matches_building_at_once(make, monkeypatch):
    r = make(TEXTS[:6], ids=IDS[:6], metadatas=METAS[:6])
    calls = spy_embed(r, monkeypatch)
    added = r.add_texts(TEXTS[6:], ids=IDS[6:], metadatas=METAS[6:])
    assert added == IDS[6:]
    assert calls == [TEXTS[6:]]
    assert len(r) == len(TEXTS)
    assert_equivalent(r, make(TEXTS, ids=IDS, metadatas=METAS))


def test_add_documents_embeds_only_new_chunks_and_matches_building_at_once(
    tiny_bert_dir, monkeypatch
):
    docs = [LCDocument(id=i, page_content=t, metadata=m) for i, t, m in zip(IDS, TEXTS, METAS)]
    r = QRAGRetriever.from_documents(docs[:4], checkpoint=str(tiny_bert_dir), k=4)
    calls = spy_embed(r, monkeypatch)
    assert r.add_documents(docs[4:7]) == IDS[4:7]
    assert r.add_documents(docs[7:]) == IDS[7:]
    assert calls == [TEXTS[4:7], TEXTS[7:]]
    once = QRAGRetriever.from_documents(docs, checkpoint=str(tiny_bert_dir), k=4)
    assert_equivalent(r, once)
    # no metadata["source"]: each document is its own
    assert all(c.order == 0 and c.doc_id == c.id for c in r.index.snapshot().chunks)
    assert r.get_by_ids(["c9"])[0].metadata == {"n": 9}


def test_add_documents_with_explicit_ids(make):
    r = make(TEXTS[:2], ids=IDS[:2])
    assert r.add_documents([LCDocument(page_content=TEXTS[2])], ids=["given"]) == ["given"]
    assert r.index.ids == ["c0", "c1", "given"]
    assert r.get_by_ids(["given"])[0].page_content == TEXTS[2]


def test_delete_removes_exactly_those_chunks(make):
    r = make(TEXTS, ids=IDS, metadatas=METAS)
    gone = {"c2", "c5"}
    assert r.delete(sorted(gone)) is True
    assert len(r) == len(TEXTS) - 2
    assert r.index.ids == [i for i in IDS if i not in gone]
    assert r.get_by_ids(sorted(gone)) == []
    for q in QUESTIONS:
        got = r.invoke(q, k=len(TEXTS))
        assert len(got) == len(TEXTS) - 2
        assert gone.isdisjoint(d.id for d in got)
    keep = [i for i in range(len(TEXTS)) if IDS[i] not in gone]
    rebuilt = make(
        [TEXTS[i] for i in keep], ids=[IDS[i] for i in keep], metadatas=[METAS[i] for i in keep]
    )
    assert_equivalent(r, rebuilt)
    # A single id as a plain string.
    assert r.delete("c0") is True
    assert "c0" not in r.index.ids and len(r) == len(TEXTS) - 3


def test_delete_unknown_id_returns_false_and_changes_nothing(make):
    r = make(TEXTS, ids=IDS)
    before = results(r)
    assert r.delete(["nope"]) is False
    assert r.delete([]) is False
    assert len(r) == len(TEXTS)
    assert results(r) == before
    with pytest.raises(QRAGError, match="ids"):
        r.delete()


def test_deleted_id_can_be_added_again(make):
    r = make(TEXTS[:3], ids=IDS[:3])
    r.delete(["c1"])
    r.add_texts(["Emma went to the city."], ids=["c1"])
    assert r.get_by_ids(["c1"])[0].page_content == "Emma went to the city."
    assert len(r) == 3


def test_duplicate_ids_are_errors_and_leave_the_index_unchanged(make, monkeypatch):
    with pytest.raises(QRAGError, match="unique"):
        make(TEXTS[:2], ids=["same", "same"])
    r = make(TEXTS[:3], ids=IDS[:3])
    calls = spy_embed(r, monkeypatch)
    with pytest.raises(QRAGError, match="already in the index"):
        r.add_texts(["Emma went to the city."], ids=["c1"])
    assert calls == []  # rejected before embedding
    with pytest.raises(QRAGError, match="unique"):
        r.add_texts(["Emma went to the city.", "Bill went north."], ids=["x", "x"])
    assert r.index.ids == IDS[:3]
    assert [d.page_content for d in r.get_by_ids(["c1"])] == [TEXTS[1]]
    with pytest.raises(QRAGError, match="ids has 1 entries for 2 texts"):
        r.add_texts(["a", "b"], ids=["only-one"])
    with pytest.raises(QRAGError, match="metadatas has 1 entries for 2 texts"):
        r.add_texts(["a", "b"], metadatas=[{}])
    assert len(r) == 3


def test_get_by_ids(make):
    r = make(TEXTS, ids=IDS, metadatas=METAS)
    docs = r.get_by_ids(["c7", "missing", "c3"])
    assert [(d.id, d.page_content, d.metadata) for d in docs] == [
        ("c7", TEXTS[7], {"n": 7}),
        ("c3", TEXTS[3], {"n": 3}),
    ]
    assert r.get_by_ids([]) == []
    # Returned metadata is a copy: editing it does not change the index.
    docs[0].metadata["n"] = -1
    assert r.get_by_ids(["c7"])[0].metadata == {"n": 7}


def test_default_ids_are_unique_strings(make):
    r = make()
    ids = r.add_texts(TEXTS)
    assert len(set(ids)) == len(TEXTS) and all(isinstance(i, str) and i for i in ids)
    assert sorted(r.index.ids) == sorted(ids)
    assert r.add_texts([]) == []
    assert len(r) == len(TEXTS)


def test_default_ids_are_stable_and_adding_again_replaces(make):
    """Ids derive from the chunk (text, metadata, document): the same in any order of arrival
    and in another retriever; adding the same chunks again replaces them, never duplicates."""
    first = make().add_texts(TEXTS, metadatas=METAS)
    r = make()
    shuffled = r.add_texts(TEXTS[::-1], metadatas=METAS[::-1])
    assert shuffled == first[::-1]
    assert r.add_texts(TEXTS[:3], metadatas=METAS[:3]) == first[:3]
    assert len(r) == len(TEXTS)
    twice = r.add_texts(["same", "same"])  # repeats in one call still get two ids
    assert len(set(twice)) == 2 and len(r) == len(TEXTS) + 2


def test_source_metadata_groups_chunks_into_documents(make):
    """``metadata["source"]`` (or ``doc_id=``) names a chunk's document; its chunks keep their
    order, the documents' order of arrival does not matter."""
    metas = [{"source": "b" if i % 2 else "a"} for i in range(len(TEXTS))]
    r = make()
    r.add_texts(TEXTS, metadatas=metas)
    chunks = r.index.snapshot().chunks
    assert [c.doc_id for c in chunks] == ["a"] * ((len(TEXTS) + 1) // 2) + ["b"] * (len(TEXTS) // 2)
    assert [c.text for c in chunks if c.doc_id == "a"] == TEXTS[0::2]
    one = make()
    one.add_texts(TEXTS, doc_id="story")
    assert {c.doc_id for c in one.index.snapshot().chunks} == {"story"}
    assert [c.text for c in one.index.snapshot().chunks] == TEXTS


def test_results_name_their_document_and_delete_takes_document_ids(make):
    """A hit names its document (``metadata["qrag_doc_id"]``; LlamaIndex ``ref_doc_id``);
    ``delete([doc_id])`` and LlamaIndex ``delete_ref_doc`` remove every chunk of it."""
    r = make()
    r.add_texts(TEXTS[:6], doc_id="story")
    r.add_texts(TEXTS[6:], metadatas=[{"source": "notes"}] * len(TEXTS[6:]))
    doc = r.invoke(QUESTIONS[0], k=len(TEXTS))[0]
    assert doc.metadata["qrag_doc_id"] in {"story", "notes"}
    node = r.retrieve(QUESTIONS[0])[0]
    assert node.node.ref_doc_id == node.node.metadata["qrag_doc_id"]
    assert r.delete(["story"]) is True and len(r) == len(TEXTS) - 6
    r.delete_ref_doc("notes")
    assert len(r) == 0


def test_blank_input_is_refused_or_skipped_by_name(make):
    r = make()
    with pytest.raises(QRAGError, match="blank"):
        r.add_texts(["a fact", "  "])
    assert len(r) == 0
    with pytest.warns(UserWarning, match="skipped 1 blank"):
        r.add_documents([LCDocument(page_content=""), LCDocument(page_content="a fact")])
    assert len(r) == 1
    with pytest.raises(QRAGError, match="single Document: pass \\[document\\]"):
        r.add_documents(LCDocument(page_content="a fact"))
