"""``QRAGRetriever`` inside LangChain and LlamaIndex: both base classes, chains, query engines,
the ``from_*`` constructors, filters, per-call overrides, batch and async."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document as LIDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import TextNode
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS, build_retriever, chunk_ids

from qrag_integrations import QRAGError, QRAGRetriever

QUESTION = BABI_QUESTIONS[0]
# The shared ten chunks plus two more, in this order: tests slice TEXTS[:6] / TEXTS[6:] and
# filter on even / odd rows.
TEXTS = [*BABI_TEXTS, "Bill journeyed to the north.", "Emma went to the city."]
IDS = chunk_ids(TEXTS)
METAS = [{"src": "even" if i % 2 == 0 else "odd", "n": i} for i in range(len(TEXTS))]
QRAG_KEYS = {"qrag_step", "qrag_q_value", "qrag_position", "score", "qrag_doc_id"}


def summary(docs: list[LCDocument]) -> list[tuple[str, str, int, int]]:
    """Everything but the float Q-value, which is compared with ``q_values``."""
    return [
        (d.id, d.page_content, d.metadata["qrag_step"], d.metadata["qrag_position"]) for d in docs
    ]


def q_values(docs: list[LCDocument]) -> list[float]:
    return [d.metadata["qrag_q_value"] for d in docs]


def assert_same(a: list[LCDocument], b: list[LCDocument]) -> None:
    assert summary(a) == summary(b)
    assert q_values(a) == pytest.approx(q_values(b), rel=1e-5, abs=1e-6)


def user_meta(doc: LCDocument) -> dict[str, Any]:
    return {k: v for k, v in doc.metadata.items() if k not in QRAG_KEYS}


def format_docs(docs: list[LCDocument]) -> str:
    return "\n\n".join(d.page_content for d in docs)


@pytest.fixture(scope="module")
def retriever(tiny_bert_dir) -> QRAGRetriever:
    """Shared, never modified: 12 chunks with ids and metadata, k=3."""
    return build_retriever(tiny_bert_dir, TEXTS, metadatas=METAS, ids=IDS, k=3)


@pytest.fixture
def make(tiny_bert_dir):
    def build(texts=TEXTS, **kwargs: Any) -> QRAGRetriever:
        kwargs.setdefault("k", 3)
        return build_retriever(tiny_bert_dir, texts, **kwargs)

    return build


# -- both frameworks ------------------------------------------------------------------------------
def test_is_a_langchain_and_a_llamaindex_retriever(retriever):
    assert isinstance(retriever, LCBaseRetriever)
    assert isinstance(retriever, LIBaseRetriever)
    assert len(retriever) == len(TEXTS)
    assert retriever.get_prompts() == {}


def test_results_carry_steps_q_values_positions_and_user_metadata(retriever):
    docs = retriever.invoke(QUESTION)
    assert [d.metadata["qrag_step"] for d in docs] == [1, 2, 3]
    ids = [d.id for d in docs]
    assert len(set(ids)) == 3 and set(ids) <= set(IDS)
    hits = retriever.search([QUESTION])[0]
    assert ids == [h.chunk.id for h in hits]
    for doc, hit in zip(docs, hits):
        row = IDS.index(doc.id)
        assert doc.page_content == TEXTS[row]
        assert user_meta(doc) == METAS[row]
        assert isinstance(doc.metadata["qrag_q_value"], float)
        assert doc.metadata["qrag_q_value"] == hit.q_value
        assert doc.metadata["score"] == hit.q_value
        assert doc.metadata["qrag_position"] == hit.position
        assert isinstance(doc.metadata["qrag_position"], int) and doc.metadata["qrag_position"] >= 0

    nodes = retriever.retrieve(QUESTION)
    assert [n.node.node_id for n in nodes] == ids
    assert [n.node.get_content() for n in nodes] == [d.page_content for d in docs]
    assert [n.score for n in nodes] == q_values(docs)
    assert [n.node.metadata for n in nodes] == [d.metadata for d in docs]


def test_same_object_in_an_lcel_chain_and_a_llamaindex_query_engine(retriever):
    expected = retriever.invoke(QUESTION)
    context = format_docs(expected)

    prompts: list[str] = []

    class CapturePrompts(BaseCallbackHandler):
        def on_llm_start(self, serialized: Any, prompts_: list[str], **kwargs: Any) -> None:
            prompts.extend(prompts_)

    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    llm = FakeListLLM(responses=["In the garden."])
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    assert chain.invoke(QUESTION, config={"callbacks": [CapturePrompts()]}) == "In the garden."
    assert len(prompts) == 1
    assert context in prompts[0]
    assert f"Question: {QUESTION}" in prompts[0]
    for text in set(TEXTS) - {d.page_content for d in expected}:
        assert text not in prompts[0]

    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    sources = response.source_nodes
    assert [s.node.node_id for s in sources] == [d.id for d in expected]
    assert [s.node.get_content() for s in sources] == [d.page_content for d in expected]
    assert [s.score for s in sources] == [s.node.metadata["qrag_q_value"] for s in sources]
    assert [s.score for s in sources] == pytest.approx(q_values(expected), rel=1e-6)
    # MockLLM echoes its prompt: the retrieved chunks reached the LLM.
    for doc in expected:
        assert doc.page_content in str(response)


# -- constructors -----------------------------------------------------------------------------------
def test_from_documents_with_langchain_documents(tiny_bert_dir):
    docs = [LCDocument(id=i, page_content=t, metadata=m) for i, t, m in zip(IDS, TEXTS, METAS)]
    r = QRAGRetriever.from_documents(docs, checkpoint=str(tiny_bert_dir), k=4)
    assert r.index.ids == IDS
    got = r.invoke(QUESTION)
    assert len(got) == 4
    for d in got:
        assert d.page_content == TEXTS[IDS.index(d.id)]
        assert user_meta(d) == METAS[IDS.index(d.id)]
    assert [c.get_content() for c in r.retrieve(QUESTION)] == [d.page_content for d in got]


def test_from_documents_with_llamaindex_documents_and_sentence_splitter(tiny_bert_dir):
    docs = [
        LIDocument(text=" ".join(TEXTS[:6]) * 3, id_="story-1", metadata={"story": 1}),
        LIDocument(text=" ".join(TEXTS[6:]) * 3, id_="story-2", metadata={"story": 2}),
    ]
    splitter = SentenceSplitter(chunk_size=24, chunk_overlap=0)
    expected_texts = [n.get_content() for n in splitter.get_nodes_from_documents(docs)]
    assert len(expected_texts) > 4  # the splitter really split

    r = QRAGRetriever.from_documents(
        docs, checkpoint=str(tiny_bert_dir), k=3, text_splitter=splitter
    )
    chunks = r.index.snapshot().chunks
    assert [c.text for c in chunks] == expected_texts
    for story in ("story-1", "story-2"):
        mine = [c for c in chunks if c.doc_id == story]
        assert mine and [c.order for c in mine] == list(range(len(mine)))
        assert all(c.metadata["story"] == int(story[-1]) for c in mine)
    assert {c.doc_id for c in chunks} == {"story-1", "story-2"}
    got = r.invoke(QUESTION)
    assert len(got) == 3 and all(d.page_content in expected_texts for d in got)


class SentenceTextSplitter:
    """A LangChain-style splitter (``split_text``), for when langchain_text_splitters is absent."""

    def split_text(self, text: str) -> list[str]:
        return [s.strip() + "." for s in text.split(".") if s.strip()]


def test_from_documents_with_a_split_text_splitter(tiny_bert_dir):
    docs = [
        LCDocument(page_content=" ".join(TEXTS[:5]), metadata={"part": 1}),
        LCDocument(page_content=" ".join(TEXTS[5:]), metadata={"part": 2}),
    ]
    r = QRAGRetriever.from_documents(
        docs, checkpoint=str(tiny_bert_dir), k=2, text_splitter=SentenceTextSplitter()
    )
    chunks = r.index.snapshot().chunks
    assert [c.text for c in chunks] == TEXTS
    assert [c.metadata["part"] for c in chunks] == [1] * 5 + [2] * 7
    assert [c.order for c in chunks] == list(range(5)) + list(range(7))
    with pytest.raises(QRAGError, match="ids="):
        r.add_documents(docs, ids=["x", "y"], text_splitter=SentenceTextSplitter())


def test_from_documents_with_recursive_character_text_splitter(tiny_bert_dir):
    from langchain_text_splitters import RecursiveCharacterTextSplitter  # the `test` extra

    splitter = RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0)
    text = "\n\n".join(TEXTS)
    docs = [LCDocument(page_content=text, metadata={"book": "babi"})]
    expected = splitter.split_text(text)
    assert len(expected) > 2
    r = QRAGRetriever.from_documents(
        docs, checkpoint=str(tiny_bert_dir), k=2, text_splitter=splitter
    )
    chunks = r.index.snapshot().chunks
    assert [c.text for c in chunks] == expected
    assert all(c.metadata == {"book": "babi"} for c in chunks)
    assert len(r.invoke(QUESTION)) == 2


def test_from_nodes_keeps_node_ids_and_metadata(tiny_bert_dir):
    nodes = [
        TextNode(id_=f"node-{i}", text=t, metadata=m) for i, (t, m) in enumerate(zip(TEXTS, METAS))
    ]
    r = QRAGRetriever.from_nodes(nodes, checkpoint=str(tiny_bert_dir), k=3)
    assert r.index.ids == [n.node_id for n in nodes]
    for got in r.retrieve(QUESTION):
        row = int(got.node.node_id.removeprefix("node-"))
        assert got.node.get_content() == TEXTS[row]
        assert {k: v for k, v in got.node.metadata.items() if k not in QRAG_KEYS} == METAS[row]


def test_from_llama_index_reindexes_the_docstore_with_the_qrag_encoder(tiny_bert_dir):
    nodes = [
        TextNode(id_=f"node-{i}", text=t, metadata=m) for i, (t, m) in enumerate(zip(TEXTS, METAS))
    ]
    vector_index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    r = QRAGRetriever.from_llama_index(vector_index, checkpoint=str(tiny_bert_dir), k=3)
    assert r.index.ids == [n.node_id for n in nodes]
    emb = r.index.snapshot().embeddings
    assert emb.shape == (len(TEXTS), 32)  # Q-RAG's chunk encoder, not the 8-dim mock
    assert emb.numpy() == pytest.approx(r.model.embed_chunks(TEXTS).numpy(), rel=1e-5, abs=1e-6)
    direct = QRAGRetriever.from_nodes(nodes, checkpoint=str(tiny_bert_dir), k=3)
    assert_same(r.invoke(QUESTION), direct.invoke(QUESTION))

    empty = VectorStoreIndex([], embed_model=MockEmbedding(embed_dim=8))
    with pytest.raises(QRAGError, match="no nodes"):
        QRAGRetriever.from_llama_index(empty, checkpoint=str(tiny_bert_dir))


def test_from_vector_store_reindexes_its_documents(tiny_bert_dir):
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    store.add_texts(TEXTS, metadatas=METAS, ids=IDS)
    r = QRAGRetriever.from_vector_store(store, checkpoint=str(tiny_bert_dir), k=3)
    assert r.index.ids == IDS
    assert r.index.snapshot().embeddings.shape == (len(TEXTS), 32)
    docs = [LCDocument(id=i, page_content=t, metadata=m) for i, t, m in zip(IDS, TEXTS, METAS)]
    direct = QRAGRetriever.from_documents(docs, checkpoint=str(tiny_bert_dir), k=3)
    got = r.invoke(QUESTION)
    assert_same(got, direct.invoke(QUESTION))
    assert all(user_meta(d) == METAS[IDS.index(d.id)] for d in got)

    some = QRAGRetriever.from_vector_store(
        store, ids=["c4", "c1"], checkpoint=str(tiny_bert_dir), k=3
    )
    assert sorted(some.index.ids) == ["c1", "c4"]
    assert {d.id for d in some.invoke(QUESTION)} == {"c1", "c4"}


# -- filters, thresholds, overrides --------------------------------------------------------------------
def test_metadata_filter_as_field_and_per_call(make, retriever):
    filtered = make(metadatas=METAS, ids=IDS, filter={"src": "even"})
    got = filtered.invoke(QUESTION)
    assert len(got) == 3 and all(d.metadata["src"] == "even" for d in got)
    assert all(n.node.metadata["src"] == "even" for n in filtered.retrieve(QUESTION))
    # A per-call filter overrides the field.
    odd = filtered.invoke(QUESTION, filter={"src": "odd"})
    assert len(odd) == 3 and all(d.metadata["src"] == "odd" for d in odd)
    # Lists mean "any of"; the shared retriever has no default filter.
    few = retriever.invoke(QUESTION, filter={"n": [1, 4, 7]}, k=5)
    assert sorted(d.id for d in few) == ["c1", "c4", "c7"]
    assert retriever.invoke(QUESTION, filter={"src": "none"}) == []
    # Positions are laid out over the matching chunks only: same as indexing just those.
    evens = [i for i in range(len(TEXTS)) if i % 2 == 0]
    only_even = make(
        [TEXTS[i] for i in evens], metadatas=[METAS[i] for i in evens], ids=[IDS[i] for i in evens]
    )
    assert_same(got, only_even.invoke(QUESTION))


def test_very_high_stop_threshold_returns_nothing(make, retriever):
    assert make(stop_threshold=1e9).invoke(QUESTION) == []
    assert make(stop_threshold=1e9).retrieve(QUESTION) == []
    assert retriever.invoke(QUESTION, stop_threshold=1e9) == []
    assert len(retriever.invoke(QUESTION, stop_threshold=-1e9)) == 3
    # The search stops before the first pick whose Q-value is below the threshold.
    docs = retriever.invoke(QUESTION, k=5)
    cut = q_values(docs)[1] + 1e-6
    keep = next(i for i, q in enumerate(q_values(docs)) if q < cut)
    assert keep <= 1
    assert summary(retriever.invoke(QUESTION, k=5, stop_threshold=cut)) == summary(docs[:keep])


def test_per_call_k_override(retriever):
    assert len(retriever.invoke(QUESTION)) == 3
    one = retriever.invoke(QUESTION, k=1)
    five = retriever.invoke(QUESTION, k=5)
    assert len(one) == 1 and len(five) == 5
    # Greedy search: fewer steps give a prefix of more steps.
    assert summary(one) == summary(five[:1])
    assert summary(retriever.invoke(QUESTION)) == summary(five[:3])
    assert retriever.k == 3


# -- batch and async ----------------------------------------------------------------------------------
QUESTIONS = list(BABI_QUESTIONS[:3])


def test_batch_equals_invokes_in_one_search(retriever, monkeypatch):
    single = [retriever.invoke(q) for q in QUESTIONS]
    calls: list[list[str]] = []
    real = retriever.corpus.searcher.search

    def spy(queries, *args: Any, **kwargs: Any):
        calls.append(list(queries))
        return real(queries, *args, **kwargs)

    monkeypatch.setattr(retriever.corpus.searcher, "search", spy)
    batched = retriever.batch(QUESTIONS)
    assert calls == [QUESTIONS]
    assert len(batched) == 3
    for a, b in zip(batched, single):
        assert_same(a, b)

    calls.clear()
    ones = retriever.batch(QUESTIONS, k=1)
    assert calls == [QUESTIONS] and [len(x) for x in ones] == [1, 1, 1]
    assert [summary(x) for x in ones] == [summary(s[:1]) for s in single]

    calls.clear()
    mixed = retriever.batch([QUESTION, "  ", "Where is Mary?"], return_exceptions=True)
    assert calls == [[QUESTION, "Where is Mary?"]]
    assert isinstance(mixed[1], QRAGError)
    assert_same(mixed[0], single[0])
    assert_same(mixed[2], single[1])
    with pytest.raises(QRAGError, match="empty"):
        retriever.batch([QUESTION, ""])
    assert retriever.batch([]) == []
    assert retriever._prefetched == {}  # nothing kept once a batch returns


def test_batch_fires_langchain_callbacks_per_question(retriever):
    from langchain_core.callbacks import BaseCallbackHandler

    class Recorder(BaseCallbackHandler):
        def __init__(self) -> None:
            self.events: list[tuple[str, Any]] = []

        def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
            self.events.append(("start", query))

        def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
            self.events.append(("end", len(documents)))

        def on_retriever_error(self, error: BaseException, **kwargs: Any) -> None:
            self.events.append(("error", type(error).__name__))

    recorder = Recorder()
    out = retriever.batch(
        [QUESTION, "", "Where is Mary?"],
        config={"callbacks": [recorder]},
        return_exceptions=True,
        k=2,
    )
    assert isinstance(out[1], QRAGError) and [len(out[0]), len(out[2])] == [2, 2]
    starts = sorted(q for e, q in recorder.events if e == "start")
    assert starts == sorted([QUESTION, "", "Where is Mary?"])
    assert sorted(str(v) for e, v in recorder.events if e != "start") == ["2", "2", "QRAGError"]


def test_async_results_equal_sync(retriever):
    single = [retriever.invoke(q) for q in QUESTIONS]
    nodes = retriever.retrieve(QUESTION)

    async def run() -> tuple[Any, Any, Any]:
        return (
            await retriever.abatch(QUESTIONS),
            await asyncio.gather(*(retriever.ainvoke(q) for q in QUESTIONS)),
            await retriever.aretrieve(QUESTION),
        )

    abatched, ainvoked, aretrieved = asyncio.run(run())
    for a, b, s in zip(abatched, ainvoked, single):
        assert_same(a, s)
        assert_same(b, s)
    assert [n.node.node_id for n in aretrieved] == [n.node.node_id for n in nodes]
    assert [n.score for n in aretrieved] == pytest.approx([n.score for n in nodes], rel=1e-5)
    assert len(asyncio.run(retriever.ainvoke(QUESTION, k=1))) == 1


def test_ainvoke_does_not_block_the_event_loop(make):
    big = make([f"{TEXTS[i % len(TEXTS)][:-1]} number {i}." for i in range(300)], k=40)

    async def run() -> tuple[int, float, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.002)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # let the ticker start
        ticks = 0
        start = time.perf_counter()
        docs = await big.ainvoke(QUESTION)
        elapsed = time.perf_counter() - start
        seen = ticks
        done.set()
        await task
        return seen, elapsed, len(docs)

    ticks, elapsed, n = asyncio.run(run())
    assert n == 40
    # 40 steps take tens of milliseconds at least; run on the loop it would tick ~never.
    assert ticks >= 5, f"only {ticks} ticks in {elapsed:.3f}s"
