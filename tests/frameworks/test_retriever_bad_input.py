"""Bad and unusual input to ``QRAGRetriever``: clear ``QRAGError``\\ s, documented edge cases,
unicode and very long texts."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core.schema import TextNode
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS, build_retriever

from qrag_integrations import CheckpointError, QRAGError, QRAGRetriever

QUESTION = BABI_QUESTIONS[0]
# Five chunks of the shared corpus (a k=50 test expects steps 1..5).
TEXTS = [BABI_TEXTS[i] for i in (0, 2, 5, 7, 8)]


@pytest.fixture(scope="module")
def retriever(tiny_bert_dir) -> QRAGRetriever:
    return build_retriever(tiny_bert_dir, TEXTS, k=2)


def test_qrag_error_is_a_value_error():
    assert issubclass(QRAGError, ValueError)
    assert issubclass(CheckpointError, QRAGError)


# -- queries ---------------------------------------------------------------------------------------
NON_STRING_QUERIES = pytest.mark.parametrize(
    ("query", "message"),
    [
        (None, "query must be a string, got NoneType"),
        (3, "query must be a string, got int"),
        (["a"], "query must be a string, got list"),
    ],
    ids=["none", "int", "list"],
)


@NON_STRING_QUERIES
def test_non_string_query_via_langchain(retriever, query, message):
    with pytest.raises(QRAGError, match=message):
        retriever.invoke(query)
    with pytest.raises(QRAGError, match=message):
        asyncio.run(retriever.ainvoke(query))


@NON_STRING_QUERIES
def test_non_string_query_via_llamaindex(retriever, query, message):
    with pytest.raises(QRAGError, match=message):
        retriever.retrieve(query)
    with pytest.raises(QRAGError, match=message):
        asyncio.run(retriever.aretrieve(query))


@pytest.mark.parametrize("query", ["", "   ", "\n\t "], ids=["empty", "spaces", "whitespace"])
def test_empty_query(retriever, query):
    with pytest.raises(QRAGError, match="query is empty"):
        retriever.invoke(query)
    with pytest.raises(QRAGError, match="query is empty"):
        retriever.retrieve(query)
    with pytest.raises(QRAGError, match="query is empty"):
        asyncio.run(retriever.ainvoke(query))
    with pytest.raises(QRAGError, match="query is empty"):
        asyncio.run(retriever.aretrieve(query))
    with pytest.raises(QRAGError, match="query is empty"):
        retriever.search([QUESTION, query])


# -- k ---------------------------------------------------------------------------------------------
BAD_K = [0, -1, "3", True, 2.0]


@pytest.mark.parametrize("k", BAD_K, ids=repr)
def test_bad_k_per_call(retriever, k):
    with pytest.raises(QRAGError, match="k must be an integer >= 1"):
        retriever.invoke(QUESTION, k=k)
    with pytest.raises(QRAGError, match="k must be an integer >= 1"):
        retriever.batch([QUESTION], k=k)
    with pytest.raises(QRAGError, match="k must be an integer >= 1"):
        retriever.search([QUESTION], k=k)


@pytest.mark.parametrize("k", BAD_K, ids=repr)
def test_bad_k_at_construction(tiny_bert_dir, k):
    with pytest.raises(QRAGError, match="k must be an integer >= 1"):
        QRAGRetriever(checkpoint=str(tiny_bert_dir), k=k)
    with pytest.raises(QRAGError, match="k must be an integer >= 1"):
        QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir), k=k)


def test_k_larger_than_the_corpus_returns_every_chunk_once(retriever):
    docs = retriever.invoke(QUESTION, k=50)
    assert sorted(d.page_content for d in docs) == sorted(TEXTS)
    assert [d.metadata["qrag_step"] for d in docs] == [1, 2, 3, 4, 5]
    assert len(retriever.retrieve(QUESTION)) == 2


# -- empty corpus ----------------------------------------------------------------------------------
def test_empty_corpus_returns_nothing_then_works_after_adding(tiny_bert_dir):
    empty = QRAGRetriever(checkpoint=str(tiny_bert_dir), k=3)
    assert len(empty) == 0
    assert empty.invoke(QUESTION) == []
    assert empty.retrieve(QUESTION) == []
    assert asyncio.run(empty.ainvoke(QUESTION)) == []
    assert empty.batch([QUESTION, "Where is Mary?"]) == [[], []]
    assert QRAGRetriever.from_texts([], checkpoint=str(tiny_bert_dir)).invoke(QUESTION) == []
    # Bad queries are still refused on an empty corpus.
    with pytest.raises(QRAGError, match="query is empty"):
        empty.invoke(" ")
    empty.add_texts(TEXTS[:2], ids=["a", "b"])
    docs = empty.invoke(QUESTION)
    assert sorted(d.id for d in docs) == ["a", "b"]
    # Deleting everything makes it empty again.
    assert empty.delete(["a", "b"]) is True
    assert empty.invoke(QUESTION) == []


# -- unusual texts ---------------------------------------------------------------------------------
def test_unicode_texts_index_and_retrieve(tiny_bert_dir):
    texts = [
        "The football ⚽ is in the garden 🌳🏡.",
        "足球在花园里。约翰拿起了足球。",
        "الكرة في الحديقة",  # Arabic, right to left
        "כדור הרגל נמצא בגן",  # Hebrew, right to left
        "Zoë naïve café — “quotes” \u200b zero width",
        "🙂" * 50,
    ]
    r = QRAGRetriever.from_texts(
        texts, ids=[f"u{i}" for i in range(len(texts))], checkpoint=str(tiny_bert_dir), k=6
    )
    for query in ("Where is the ⚽?", "足球在哪里？", "أين الكرة؟"):
        docs = r.invoke(query)
        assert sorted(d.page_content for d in docs) == sorted(texts)
    assert r.get_by_ids(["u1"])[0].page_content == texts[1]


def test_very_long_text_is_truncated_not_fatal(tiny_bert_dir):
    long_text = ("John went to the garden and picked up the football. " * 1000)[:50_000]
    assert len(long_text) == 50_000
    r = QRAGRetriever.from_texts(
        [long_text, "Mary went to the kitchen."],
        ids=["long", "short"],
        checkpoint=str(tiny_bert_dir),
        k=2,
    )
    max_tokens = r.model.config.max_chunk_tokens
    tokens = r.model.tokenize([long_text], max_tokens)["input_ids"]
    assert tokens.shape == (1, max_tokens)
    # The stored embedding is that of the truncated text.
    truncated = r.model.tokenizer.decode(tokens[0], skip_special_tokens=True)
    expected = r.model.embed_chunks([truncated])[0]
    assert r.index.snapshot().embeddings[0].numpy() == pytest.approx(
        expected.numpy(), rel=1e-3, abs=1e-5
    )
    docs = r.invoke(long_text)  # a 50,000-character question is truncated too
    assert sorted(d.id for d in docs) == ["long", "short"]
    assert r.get_by_ids(["long"])[0].page_content == long_text  # the text itself is kept whole


# -- bad corpus input ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["nested"], {"text": "x"}], ids=repr)
def test_non_string_text_is_refused(tiny_bert_dir, bad):
    with pytest.raises(QRAGError, match=f"texts must be strings; item 1 is {type(bad).__name__}"):
        QRAGRetriever.from_texts(["fine", bad], checkpoint=str(tiny_bert_dir))
    r = QRAGRetriever(texts=["fine"], checkpoint=str(tiny_bert_dir))
    with pytest.raises(QRAGError, match="texts must be strings"):
        r.add_texts(["also fine", bad])
    assert len(r) == 1


def test_a_bare_string_is_not_a_list_of_texts(tiny_bert_dir):
    """``from_texts("abc")`` would otherwise index the chunks "a", "b" and "c"."""
    with pytest.raises(QRAGError, match="texts"):
        QRAGRetriever.from_texts("John went to the garden.", checkpoint=str(tiny_bert_dir))


@pytest.mark.parametrize(
    "bad",
    ["a plain string", {"page_content": "x"}, 42, None, ("tuple", "of", "str")],
    ids=["str", "dict", "int", "none", "tuple"],
)
def test_documents_of_a_wrong_type_are_refused(tiny_bert_dir, bad):
    good = LCDocument(page_content="fine")
    with pytest.raises(
        QRAGError,
        match=f"documents must be LangChain Documents or LlamaIndex nodes; item 1 is {type(bad).__name__}",
    ):
        QRAGRetriever.from_documents([good, bad], checkpoint=str(tiny_bert_dir))
    r = QRAGRetriever.from_nodes([TextNode(id_="n", text="fine")], checkpoint=str(tiny_bert_dir))
    with pytest.raises(QRAGError, match="documents must be"):
        r.add_documents([good, bad])
    assert r.index.ids == ["n"]


def test_metadata_and_ids_of_the_wrong_length(tiny_bert_dir):
    with pytest.raises(QRAGError, match="metadatas has 1 entries for 2 texts"):
        QRAGRetriever.from_texts(["a", "b"], metadatas=[{}], checkpoint=str(tiny_bert_dir))
    with pytest.raises(QRAGError, match="ids has 3 entries for 2 texts"):
        QRAGRetriever.from_texts(["a", "b"], ids=["1", "2", "3"], checkpoint=str(tiny_bert_dir))
    with pytest.raises(QRAGError, match="non-empty"):
        QRAGRetriever.from_texts(["a", "b"], ids=["1", ""], checkpoint=str(tiny_bert_dir))


# -- bad settings ----------------------------------------------------------------------------------
def test_missing_checkpoint_folder(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        QRAGRetriever(checkpoint=str(tmp_path / "no-such-checkpoint"))
    with pytest.raises(CheckpointError, match="does not exist"):
        QRAGRetriever.from_texts(TEXTS, checkpoint=str(tmp_path / "no-such-checkpoint"))


def test_checkpoint_that_is_a_file(tmp_path):
    file = tmp_path / "model.bin"
    file.write_bytes(b"\0" * 16)
    with pytest.raises(CheckpointError, match="is a file"):
        QRAGRetriever(checkpoint=str(file))


@pytest.mark.parametrize("dtype", ["int8", "float64", "fp16", ""])
def test_bad_index_dtype(tiny_bert_dir, dtype):
    with pytest.raises(QRAGError, match=f"index_dtype must be one of .*got {dtype!r}"):
        QRAGRetriever(checkpoint=str(tiny_bert_dir), index_dtype=dtype)


def test_bad_filter(retriever):
    with pytest.raises(QRAGError, match="filter must be a mapping or a callable"):
        retriever.invoke(QUESTION, filter=["not", "a", "mapping"])
    # A callable filter is fine per call.
    docs = retriever.invoke(QUESTION, filter=lambda meta: False)
    assert docs == []


def test_delete_needs_ids(retriever):
    with pytest.raises(QRAGError, match="delete needs ids"):
        retriever.delete()


# -- arguments of the wrong type name the type expected ----------------------------------------------
WRONG_TYPES = {
    "search(str)": (
        lambda r: r.search("a question"),
        r"search's questions must be a list of strings, got a single string; invoke\(question\)",
    ),
    "search(int)": (lambda r: r.search(5), "search's questions must be a list of strings, got int"),
    "invoke(list)": (
        lambda r: r.invoke(["a question"]),
        r"query must be a string, got list; search\(questions\) and batch\(questions\)",
    ),
    "batch(str)": (
        lambda r: r.batch("a question"),
        r"batch's inputs must be a list of questions, got a single string; invoke\(question\)",
    ),
    "batch(int)": (lambda r: r.batch(5), "batch's inputs must be a list of questions, got int"),
    "add_texts(int)": (lambda r: r.add_texts(5), "texts must be a list of strings, got int"),
    "add_texts(str)": (lambda r: r.add_texts("text"), r"not a single string \(pass \[text\]"),
    "add_texts(metadatas=dict)": (
        lambda r: r.add_texts(["a text"], metadatas={"src": "a"}),
        "metadatas must be a list of dicts, one per text, got dict",
    ),
    "add_texts(doc_id=int)": (
        lambda r: r.add_texts(["a text"], doc_id=5),
        "doc_id must be a string or None, got int",
    ),
    "get_by_ids(str)": (lambda r: r.get_by_ids("x"), "ids must be a list of ids, got str"),
    "save(int)": (lambda r: r.save(5), r"path must be a str or os.PathLike, got int"),
    "load(int)": (lambda r: QRAGRetriever.load(5), r"path must be a str or os.PathLike, got int"),
}


@pytest.mark.parametrize("call", WRONG_TYPES, ids=list(WRONG_TYPES))
def test_an_argument_of_the_wrong_type_names_the_type_expected(retriever, call):
    size = len(retriever)
    run, message = WRONG_TYPES[call]
    with pytest.raises(QRAGError, match=message):
        run(retriever)
    assert len(retriever) == size


def test_load_model_names_the_type_of_a_checkpoint():
    from qrag_integrations import load_model

    with pytest.raises(QRAGError, match="checkpoint must be a str or os.PathLike, got int"):
        load_model(5)
