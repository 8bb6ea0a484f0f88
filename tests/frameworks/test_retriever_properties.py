"""Property-based tests over the public API's inputs (queries, texts, metadata, ids, ``k``,
filters, thresholds): every call either works or raises ``QRAGError`` / ``TypeError`` /
``ValueError`` with a message, never another exception, and a refused call leaves the index as
it was. Whatever was accepted saves and loads back with the same metadata, or the save is
refused with a ``QRAGError`` and writes nothing.

Each call is tried twice over: with arguments of the right types and adversarial content
(unicode, huge numbers, nested metadata of any kind), and with arguments of wrong types."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from retriever_corpus import BABI_TEXTS, build_retriever, chunk_ids

from qrag_integrations import QRAGError, QRAGRetriever
from qrag_integrations.core.chunks import document_sort_key

ALLOWED = (QRAGError, TypeError, ValueError)
PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

#: Strings that have broken text handling elsewhere: empty, blank, NUL, lone surrogates (not
#: valid Unicode), zero-width, right-to-left, emoji, combining marks, long.
NASTY = st.sampled_from(
    [
        "",
        " ",
        "\t\n",
        "\x00",
        "\ud800",
        "a\udfffb",
        "\u200b",
        "\u202eevil",
        "🙂" * 3,
        "e\u0301",
        "x" * 3000,
    ]
)
TEXT = st.one_of(NASTY, st.text(max_size=40))
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
#: Metadata values, JSON or not: nested containers, tuples, sets, bytes, objects, int keys.
VALUE = st.recursive(
    st.one_of(
        SCALAR,
        st.tuples(SCALAR),
        st.frozensets(st.integers(), max_size=2),
        st.binary(max_size=4),
        st.builds(object),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(TEXT, st.integers()), inner, max_size=3),
    ),
    max_leaves=8,
)
METADATA = st.dictionaries(TEXT, VALUE, max_size=4)
WRONG = st.one_of(SCALAR, st.lists(SCALAR, max_size=2), st.builds(object))

TEXTS = [BABI_TEXTS[i] for i in range(6)]
METAS = [{"src": "a" if i < 3 else "b", "n": i, "ü": ["x", {"y": None}]} for i in range(6)]
FILTER = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["src", "n", "missing", "ü"]),
        st.one_of(st.sampled_from(["a", "b", 0, 4]), VALUE, st.lists(SCALAR, max_size=3)),
        max_size=2,
    ),
)
K = st.one_of(st.none(), st.integers(1, 8), st.just(2**62))
THRESHOLD = st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-5, 5))


@pytest.fixture(scope="module")
def retriever(tiny_bert_dir: Path) -> QRAGRetriever:
    return build_retriever(tiny_bert_dir, TEXTS, metadatas=METAS, ids=chunk_ids(TEXTS), k=3)


def index_state(r: QRAGRetriever) -> tuple:
    snap = r.index.snapshot()
    return tuple(r.index.ids), tuple(repr(c) for c in snap.chunks), snap.embeddings.clone()


def assert_same_index(r: QRAGRetriever, before: tuple) -> None:
    after = index_state(r)
    assert after[:2] == before[:2] and torch.equal(after[2], before[2])


def works_or_refuses(call: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, result)``, or ``(False, exception)`` for an allowed exception with a message; any
    other exception fails the test."""
    try:
        result = call()
    except ALLOWED as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        event(f"refused: {type(exc).__name__}")
        return False, exc
    event("works")
    return True, result


def valid_hits(docs: list, r: QRAGRetriever, k: int) -> None:
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)) <= k and set(ids) <= set(r.index.ids)
    assert [d.metadata["qrag_step"] for d in docs] == list(range(1, len(docs) + 1))


def call_kwargs(**kwargs: Any) -> dict[str, Any]:
    return {name: value for name, value in kwargs.items() if value is not None}


# -- searching ------------------------------------------------------------------------------------
@PROPERTY
@given(query=TEXT, k=K, where=FILTER, threshold=THRESHOLD)
def test_invoke(retriever, query, k, where, threshold):
    before = index_state(retriever)
    kwargs = call_kwargs(k=k, filter=where, stop_threshold=threshold)
    ok, docs = works_or_refuses(lambda: retriever.invoke(query, **kwargs))
    if ok:
        valid_hits(docs, retriever, kwargs.get("k", retriever.k))
    ok, nodes = works_or_refuses(lambda: retriever.retrieve(query))
    if ok:
        assert all(isinstance(n.score, float) for n in nodes)
    assert_same_index(retriever, before)


@PROPERTY
@given(
    query=st.one_of(TEXT, WRONG),
    k=st.one_of(K, WRONG),
    where=st.one_of(FILTER, WRONG),
    threshold=st.one_of(THRESHOLD, WRONG, st.just(float("nan"))),
)
def test_invoke_with_wrong_types(retriever, query, k, where, threshold):
    before = index_state(retriever)
    works_or_refuses(
        lambda: retriever.invoke(query, **call_kwargs(k=k, filter=where, stop_threshold=threshold))
    )
    works_or_refuses(
        lambda: retriever.search(
            [query, "where is mary?"], k=k, filter=where, stop_threshold=threshold
        )
    )
    assert_same_index(retriever, before)


# -- adding, saving, deleting --------------------------------------------------------------------------
@st.composite
def additions(draw: st.DrawFn, wrong: bool = False) -> tuple[Any, Any, Any]:
    """``(texts, metadatas, ids)`` for one ``add_texts`` call: lists of matching lengths of
    adversarial content, or (``wrong``) any of them of a wrong type or length."""
    n = draw(st.integers(1, 3))
    texts = draw(st.lists(TEXT, min_size=n, max_size=n))
    metadatas = draw(st.one_of(st.none(), st.lists(METADATA, min_size=n, max_size=n)))
    ids = draw(
        st.one_of(st.none(), st.lists(st.one_of(TEXT, st.integers()), min_size=n, max_size=n))
    )
    if wrong:
        texts = draw(st.one_of(st.just(texts), TEXT, st.lists(st.one_of(TEXT, WRONG), max_size=3)))
        metadatas = draw(
            st.one_of(st.just(metadatas), WRONG, st.lists(st.one_of(METADATA, WRONG), max_size=4))
        )
        ids = draw(st.one_of(st.just(ids), WRONG, st.lists(st.one_of(TEXT, WRONG), max_size=4)))
    return texts, metadatas, ids


def check_add(retriever: QRAGRetriever, folder: Path, texts: Any, metadatas: Any, ids: Any) -> None:
    before = index_state(retriever)
    ok, added = works_or_refuses(lambda: retriever.add_texts(texts, metadatas=metadatas, ids=ids))
    if not ok:
        assert_same_index(retriever, before)
        return
    try:
        ids = retriever.index.ids
        assert set(added) <= set(ids)  # placed by document id, not appended
        keys = [
            (document_sort_key(c.doc_id), c.order, c.id) for c in retriever.index.snapshot().chunks
        ]
        assert keys == sorted(keys)
        saved, _ = works_or_refuses(lambda: retriever.save(folder))
        if saved:
            loaded = QRAGRetriever.load(folder)
            assert loaded.index.ids == retriever.index.ids
            # repr: NaN == NaN, and 1 != 1.0 != True
            assert [repr(c.metadata) for c in loaded.index.snapshot().chunks] == [
                repr(c.metadata) for c in retriever.index.snapshot().chunks
            ]
        else:
            assert not folder.exists()
    finally:
        retriever.delete(added)
    assert_same_index(retriever, before)


@PROPERTY
@given(args=additions())
def test_add_texts_then_save_and_load(retriever, tmp_path_factory, args):
    check_add(retriever, tmp_path_factory.mktemp("saved") / "r", *args)


@PROPERTY
@given(args=additions(wrong=True))
def test_add_texts_with_wrong_types(retriever, tmp_path_factory, args):
    check_add(retriever, tmp_path_factory.mktemp("saved") / "r", *args)


@PROPERTY
@given(
    ids=st.one_of(
        st.lists(
            st.one_of(st.sampled_from(["c0", "c5", "nope", ""]), TEXT, st.integers()), max_size=3
        ),
        st.sampled_from(["c1", "nope"]),
        WRONG,
    )
)
def test_delete(retriever, ids):
    before = index_state(retriever)
    removed = [
        c
        for c in retriever.index.snapshot().chunks
        if c.id in (ids if isinstance(ids, list) else [ids])
    ]
    ok, result = works_or_refuses(lambda: retriever.delete(ids))
    if not ok:
        assert_same_index(retriever, before)
        return
    assert result is bool(removed) and not {c.id for c in removed} & set(retriever.index.ids)
    for c in removed:  # put them back where they were
        retriever.index.add(
            [c.text],
            retriever.model.embed_chunks([c.text]),
            metadatas=[c.metadata],
            ids=[c.id],
            doc_ids=[c.doc_id],
            orders=[c.order],
        )
    assert tuple(retriever.index.ids) == before[0]


# -- constructing ---------------------------------------------------------------------------------------
DTYPE = st.sampled_from(["float32", "float16", "bfloat16"])


def check_constructor(retriever: QRAGRetriever, **settings_: Any) -> None:
    ok, r = works_or_refuses(
        lambda: QRAGRetriever(model=retriever.model, texts=TEXTS[:3], **call_kwargs(**settings_))
    )
    if ok:
        ok, docs = works_or_refuses(lambda: r.invoke("where is mary?"))
        if ok:
            valid_hits(docs, r, r.k)


@PROPERTY
@given(k=K, threshold=THRESHOLD, where=FILTER, dtype=DTYPE, batch_size=st.integers(1, 5))
def test_constructor_settings(retriever, k, threshold, where, dtype, batch_size):
    check_constructor(
        retriever,
        k=k,
        stop_threshold=threshold,
        filter=where,
        index_dtype=dtype,
        batch_size=batch_size,
    )


@PROPERTY
@given(
    k=st.one_of(K, WRONG),
    threshold=st.one_of(THRESHOLD, WRONG),
    where=st.one_of(FILTER, WRONG),
    dtype=st.one_of(DTYPE, st.sampled_from(["int8", "", "FLOAT32"]), WRONG),
    batch_size=st.one_of(st.integers(-2, 5), WRONG),
)
def test_constructor_settings_of_wrong_types(retriever, k, threshold, where, dtype, batch_size):
    check_constructor(
        retriever,
        k=k,
        stop_threshold=threshold,
        filter=where,
        index_dtype=dtype,
        batch_size=batch_size,
    )


# -- what the properties found ---------------------------------------------------------------------------
@pytest.mark.parametrize("threshold", [float("nan"), "0.5", True, [0.5]])
def test_a_stop_threshold_that_is_not_a_number_is_refused(retriever, threshold):
    with pytest.raises(QRAGError, match="stop_threshold must be a number"):
        retriever.invoke("where is mary?", stop_threshold=threshold)


def test_text_that_is_not_valid_unicode_is_refused(retriever):
    before = index_state(retriever)
    with pytest.raises(
        QRAGError, match=r"text 1 is not valid Unicode \(surrogates not allowed at position 1\)"
    ):
        retriever.add_texts(["fine", "a\ud800"])
    with pytest.raises(QRAGError, match="query is not valid Unicode"):
        retriever.invoke("where\udfff")
    assert_same_index(retriever, before)


@pytest.mark.parametrize("ids", [7, "abc", b"ab"])
def test_ids_that_are_not_a_list_are_refused(retriever, ids):
    before = index_state(retriever)
    with pytest.raises(QRAGError, match="ids must be a list of ids"):
        retriever.add_texts(["one", "two", "three"], ids=ids)
    if not isinstance(ids, str):  # delete takes a single id as a string
        with pytest.raises(QRAGError, match="ids must be a list of ids"):
            retriever.delete(ids)
    assert_same_index(retriever, before)


def test_metadata_that_would_load_back_different_is_not_saved(retriever, tmp_path):
    """JSON turns int keys into strings and tuples into lists: refused instead of changed."""
    for meta, problem in [
        ({1: "a"}, "metadata has a key that is not a string: 1"),
        ({"t": (1, 2)}, r"metadata\['t'\] is a tuple"),
    ]:
        retriever.add_texts(["x"], metadatas=[meta], ids=["odd"])
        try:
            with pytest.raises(QRAGError, match=rf"chunk 'odd' {problem}"):
                retriever.save(tmp_path / "r")
        finally:
            retriever.delete(["odd"])
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("separator", ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\r"])
def test_texts_with_line_separators_load_back(retriever, tmp_path, separator):
    """Records are JSON lines written unescaped; only "\\n" may end a line when they are read."""
    retriever.add_texts(
        [f"a{separator}b"], metadatas=[{f"k{separator}": separator}], ids=[f"i{separator}"]
    )
    try:
        retriever.save(tmp_path / "r")
    finally:
        retriever.delete([f"i{separator}"])
    chunk = QRAGRetriever.load(tmp_path / "r").index.get([f"i{separator}"])[0]
    assert (chunk.text, chunk.metadata) == (f"a{separator}b", {f"k{separator}": separator})


def test_a_metadata_entry_that_is_not_a_dict_is_refused(retriever):
    before = index_state(retriever)
    with pytest.raises(QRAGError, match="metadata must be a dict per text; item 0 is list"):
        retriever.add_texts(["x"], metadatas=[["a", "b"]])
    assert_same_index(retriever, before)


def test_batch_size_must_be_positive(retriever):
    with pytest.raises(ValueError, match="batch_size"):
        QRAGRetriever(model=retriever.model, batch_size=0)
