"""Every batch way of calling the retriever returns exactly what one ``invoke`` per question
returns: ``batch``, ``abatch``, ``batch_as_completed`` and ``abatch_as_completed`` from one
multi-question search, a chain's ``batch`` (the retriever inside a ``RunnableParallel``) and
concurrent ``invoke`` / ``ainvoke`` / ``retrieve`` calls from one search each; in memory with the
default model's search rules (BM25 fusion, restatements, document positions) and over a LangChain
vector store. Tiny random BERT."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableParallel, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS

from qrag_integrations import QRAGRetriever
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

#: The default model's search rules (``packaged:qrag-general-minilm``'s ``qrag_config.json``).
DEFAULT_RULES = {
    "position_mode": PositionMode.DOCUMENT_RELATIVE,
    "question_weight": 1.0,
    "lexical_depth": 20,
    "lexical_steps": 1,
    "lexical_gap": 0.03,
    "lexical_weight": 0.3,
    "supersede_margin": 0.05,
    "supersede_similarity": 0.8,
}
TEXTS = [*BABI_TEXTS, "Mary went to the garden.", "Sandra picked up the apple."]
METAS = [{"source": f"story{i % 3}", "n": i} for i in range(len(TEXTS))]
QUESTIONS = list(BABI_QUESTIONS)
FILTERS = [None, {"source": "story1"}, {"n": {"$gte": 4}}, {"source": ["story0", "story2"]}]
WAIT = 30.0


def summary(docs: list[Any]) -> list[tuple[Any, ...]]:
    """What a result says, Q-value rounded (a batch encodes states together: float rounding)."""
    return [
        (
            d.id,
            d.metadata["qrag_step"],
            d.metadata["qrag_position"],
            round(d.metadata["qrag_q_value"], 4),
        )
        for d in docs
    ]


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    return QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), **DEFAULT_RULES)).eval()


@pytest.fixture(scope="module")
def memory(model: QRAGModel) -> QRAGRetriever:
    retriever = QRAGRetriever(model=model, k=3)
    retriever.add_texts(TEXTS, metadatas=METAS, ids=[f"c{i}" for i in range(len(TEXTS))])
    return retriever


@pytest.fixture(scope="module")
def store(model: QRAGModel) -> QRAGRetriever:
    retriever = QRAGRetriever.from_store(
        InMemoryVectorStore(embedding=QRAGEmbeddings(model)),
        model=model,
        k=3,
        lexical_depth=0,  # the rules do not run over a store yet: accepted, not warned
        supersede=False,
    )
    retriever.add_texts(TEXTS, metadatas=METAS, ids=[f"c{i}" for i in range(len(TEXTS))])
    return retriever


@pytest.fixture(params=["memory", "store"])
def retriever(request: pytest.FixtureRequest) -> QRAGRetriever:
    return request.getfixturevalue(request.param)


class SearchSpy:
    """Records the questions of each search the retriever's corpus runs."""

    def __init__(self, retriever: QRAGRetriever, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[list[str]] = []
        real = retriever.corpus.search

        def search(queries: list[str], *args: Any) -> Any:
            self.calls.append(list(queries))
            return real(queries, *args)

        monkeypatch.setattr(retriever.corpus, "search", search)


@pytest.fixture
def spy(retriever: QRAGRetriever, monkeypatch: pytest.MonkeyPatch) -> Iterator[SearchSpy]:
    yield SearchSpy(retriever, monkeypatch)


# -- equality with one invoke per question -----------------------------------------------------
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    picks=st.lists(st.integers(0, len(QUESTIONS) - 1), min_size=1, max_size=6),
    k=st.one_of(st.none(), st.integers(1, 5)),
    filter=st.sampled_from(FILTERS),
    threshold=st.one_of(st.none(), st.floats(-0.5, 0.5)),
)
def test_batch_returns_what_invoke_returns(retriever, spy, picks, k, filter, threshold):
    questions = [QUESTIONS[i] for i in picks]  # repeats included
    options = {
        name: value
        for name, value in {"k": k, "filter": filter, "stop_threshold": threshold}.items()
        if value is not None
    }
    sequential = [retriever.invoke(q, **options) for q in questions]
    spy.calls.clear()
    batched = retriever.batch(questions, **options)
    assert spy.calls == [list(dict.fromkeys(questions))]  # one search, each question once
    assert [summary(b) for b in batched] == [summary(s) for s in sequential]


def test_every_batch_call_is_one_search(retriever, spy):
    questions = QUESTIONS[:5]
    expected = [summary(retriever.invoke(q, k=2)) for q in questions]

    def check(results: list[Any], calls: int = 1) -> None:
        assert [summary(r) for r in results] == expected
        assert spy.calls == [questions] * calls
        spy.calls.clear()

    spy.calls.clear()
    check(retriever.batch(questions, k=2))
    check(asyncio.run(retriever.abatch(questions, k=2)))
    done = dict(retriever.batch_as_completed(questions, k=2))
    check([done[i] for i in range(len(questions))])

    async def as_completed() -> dict[int, Any]:
        return {i: docs async for i, docs in retriever.abatch_as_completed(questions, k=2)}

    done = asyncio.run(as_completed())
    check([done[i] for i in range(len(questions))])
    # a chain that starts with the retriever batches through it
    check((retriever | (lambda docs: docs)).batch(questions, k=2))
    assert retriever._prefetched == {}  # nothing kept once a batch call returns


# -- concurrent one-question calls: a chain's batch, gather, threads ---------------------------
def test_a_chain_batch_returns_what_invoke_returns(retriever, spy):
    """``{"context": retriever, "question": passthrough}.batch``: LangChain invokes the retriever
    once per question from its thread pool, each a search of its own, side by side."""
    questions = QUESTIONS[:6]
    expected = [summary(retriever.invoke(q)) for q in questions]
    spy.calls.clear()
    chain = RunnableParallel(context=retriever, question=RunnablePassthrough())
    out = chain.batch(questions, config={"max_concurrency": len(questions)})
    assert [summary(o["context"]) for o in out] == expected
    assert [o["question"] for o in out] == questions
    assert sorted(spy.calls) == sorted([q] for q in questions)


def test_concurrent_calls_of_every_kind_get_their_own_results(retriever):
    questions = QUESTIONS[:5]
    expected = {q: summary(retriever.invoke(q)) for q in questions}

    async def gathered() -> list[Any]:
        return await asyncio.gather(*(retriever.ainvoke(q) for q in questions))

    assert [summary(o) for o in asyncio.run(gathered())] == [expected[q] for q in questions]
    # threads with two sets of options, LangChain and LlamaIndex calls: each its own results
    results: dict[tuple[str, int], Any] = {}

    def one(q: str, k: int) -> None:
        results[q, k] = retriever.invoke(q, k=k) if k == 3 else retriever.retrieve(q, k=k)

    threads = [threading.Thread(target=one, args=(q, k)) for k in (1, 3) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert {c: summary(r) for c, r in results.items() if c[1] == 3} == {
        (q, 3): expected[q] for q in questions
    }
    assert {c: [n.node.node_id for n in r] for c, r in results.items() if c[1] == 1} == {
        (q, 1): [expected[q][0][0]] for q in questions
    }
    nodes = retriever.retrieve(questions[0])
    assert [n.node.node_id for n in nodes] == [d[0] for d in expected[questions[0]]]
    assert [n.score for n in nodes] == pytest.approx(
        [d[3] for d in expected[questions[0]]], abs=1e-4
    )


def test_a_bad_question_among_concurrent_ones_fails_alone(memory):
    from qrag_integrations import QRAGError

    async def gathered() -> list[Any]:
        return await asyncio.gather(
            *(memory.ainvoke(q) for q in ["Where is Mary?", "  ", "Where is the milk?"]),
            return_exceptions=True,
        )

    good, bad, also_good = asyncio.run(gathered())
    assert isinstance(bad, QRAGError)
    assert summary(good) == summary(memory.invoke("Where is Mary?"))
    assert summary(also_good) == summary(memory.invoke("Where is the milk?"))


# -- a failing batch pass is logged, not swallowed ----------------------------------------------
def test_a_failing_batch_pass_is_logged_with_its_cause(memory, monkeypatch, caplog):
    """The one search pass of ``batch`` fails (here: a fault forced into the first call); each
    question then searches on its own, and the failure is logged with its cause."""
    real = type(memory).search
    calls = []

    def search(self: QRAGRetriever, queries: list[str], *args: Any, **kwargs: Any) -> Any:
        calls.append(list(queries))
        if len(calls) == 1:
            raise RuntimeError("forced fault in the batch pass")
        return real(self, queries, *args, **kwargs)

    monkeypatch.setattr(type(memory), "search", search)
    questions = QUESTIONS[:2]
    with caplog.at_level("WARNING", logger="qrag_integrations"):
        got = memory.batch(questions)
    assert [summary(d) for d in got] == [summary(memory.invoke(q)) for q in questions]
    assert calls[0] == questions  # the pass was tried, then one search per question
    assert "forced fault in the batch pass" in caplog.text
    assert "batch search pass of 2 questions failed" in caplog.text
