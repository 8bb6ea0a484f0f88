"""The filter promise: with ``filter=``, no chunk outside the filter is ever returned.

Property-based (hypothesis): random metadata (scalars, lists, nested objects), random filters
(equality, any-of, several keys, dotted keys, callables), random corpora changed by add / delete /
save-and-load sequences, then searches with random ``k`` (often more than the filter matches)
and ``stop_threshold``, one question or a batch, through ``invoke``, ``batch``, ``retrieve`` and
``search``, on every search path: the in-memory exact search, FAISS pre-selection
(``faiss_candidates``), and the store-backed search over Qdrant (local ``:memory:``), LangChain's
``InMemoryVectorStore`` and LlamaIndex's ``SimpleVectorStore``.

Every returned chunk must exist and pass the filter as this file defines it (every key present,
its value equal to the value or one of the values, ``True`` not ``1``; a callable's verdict),
checked against the metadata this test wrote, not what the search returned. On every path the
results are also complete: with ``k`` at least the number of matching chunks and no threshold,
every matching chunk is returned. Qdrant and LlamaIndex stores refuse callables (a
``QRAGError``); the whole operator language is tested in ``tests/core/test_filters.py`` and
``tests/stores/test_store_filters.py``.

The fast suite runs a few examples per path; ``test_filter_promise_long`` (slow) runs many more.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore
from qdrant_client import QdrantClient
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS

from qrag_integrations import MultiStepSearcher, QRAGError, QRAGRetriever, SearchSettings
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

PATHS = ["memory", "faiss", "qdrant", "langchain", "llama_index"]
#: Paths whose results are complete, not only inside: all (a store's push-down matches at least
#: the filter's chunks, and our code checks every candidate).
COMPLETE = set(PATHS)
#: Paths that take a callable filter (on metadata in memory, on a Document in LangChain's store).
CALLABLE_OK = {"memory", "faiss", "langchain"}

FAST = settings(
    max_examples=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LONG = settings(
    max_examples=500,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

#: Values that compare in surprising ways: 1 == True and 0 == False in Python, not in Qdrant.
SCALAR = st.sampled_from(["a", "b", 0, 1, True, False])
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=2), st.fixed_dictionaries({"y": SCALAR}))
METADATA = st.dictionaries(st.sampled_from(["x", "y"]), VALUE, max_size=2)
#: "x.y" names a nested field to Qdrant, a missing key to us.
FILTER_KEY = st.sampled_from(["x", "y", "x.y"])
ANY_OF = st.one_of(
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
    st.lists(st.sampled_from([0, 1, 2]), max_size=3),
    st.lists(SCALAR, max_size=3),
)


@dataclass(frozen=True)
class CallableFilter:
    """A callable filter: keeps chunks whose ``x`` has one of these reprs."""

    reprs: frozenset[str]

    def on_metadata(self, meta: dict[str, Any]) -> bool:
        return repr(meta.get("x")) in self.reprs


def pairs_in(metadata: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(key, value)`` pairs a filter can name to match (or nearly match) a chunk: scalars, list
    elements (Qdrant matches a list holding the value) and nested values by dotted key."""
    out: list[tuple[str, Any]] = []
    for key, value in metadata.items():
        if isinstance(value, list):
            out += [(key, v) for v in value]
        elif isinstance(value, dict):
            out += [(f"{key}.{inner}", v) for inner, v in value.items()]
        else:
            out.append((key, value))
    return out


@st.composite
def filters(draw: st.DrawFn, seen: list[tuple[str, Any]]) -> Any:
    """A filter, mostly built from the pairs the corpus holds, so that it matches some chunks."""

    def pair() -> tuple[str, Any]:
        if seen and draw(st.integers(0, 3)):
            return draw(st.sampled_from(seen))
        return draw(FILTER_KEY), draw(SCALAR)

    kind = draw(st.sampled_from(["equality", "equality", "any-of", "any-of", "callable", "empty"]))
    if kind == "equality":
        return dict(pair() for _ in range(draw(st.integers(1, 2))))
    if kind == "any-of":
        key, value = pair()
        return {key: [value, *draw(ANY_OF)][: draw(st.integers(1, 3))]}
    if kind == "callable":
        xs = [v for k, v in seen if k == "x"] or ["a"]
        return CallableFilter(
            frozenset(repr(v) for v in draw(st.lists(st.sampled_from(xs), min_size=1, max_size=2)))
        )
    return {}


def equal(value: Any, wanted: Any) -> bool:
    """JSON equality of a stored value and a filter's scalar: ``True`` is not ``1``."""
    return isinstance(value, bool) == isinstance(wanted, bool) and value == wanted


def inside(meta: dict[str, Any], flt: Any) -> bool:
    """Whether a chunk with ``meta`` passes ``flt``, as the README defines it."""
    if isinstance(flt, CallableFilter):
        return flt.on_metadata(meta)
    for key, wanted in flt.items():
        values = list(wanted) if isinstance(wanted, list) else [wanted]
        if key not in meta or not any(equal(meta[key], v) for v in values):
            return False
    return True


@st.composite
def chunks(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    return draw(st.lists(st.tuples(st.sampled_from(BABI_TEXTS), METADATA), min_size=1, max_size=5))


@dataclass
class Search:
    flt: Any
    k: int
    stop_threshold: float | None
    how: str
    questions: list[str] = field(default_factory=list)


OPERATION = st.one_of(
    st.tuples(st.just("add"), chunks()),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 40), min_size=1, max_size=3)),
    st.tuples(st.just("save_load"), st.none()),
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A first batch of chunks, up to four operations, then one to three searches."""
    first = draw(chunks())
    operations = draw(st.lists(OPERATION, max_size=4))
    rows = first + [row for op, arg in operations if op == "add" for row in arg]
    seen = [pair for _, meta in rows for pair in pairs_in(meta)]
    searches = draw(
        st.lists(
            st.builds(
                Search,
                flt=filters(seen),
                k=st.integers(1, 14),
                stop_threshold=st.one_of(st.none(), st.none(), st.floats(-1.0, 1.0)),
                how=st.sampled_from(["invoke", "batch", "retrieve", "search"]),
                questions=st.lists(st.sampled_from(BABI_QUESTIONS), min_size=1, max_size=2),
            ),
            min_size=1,
            max_size=3,
        )
    )
    return {
        "first": first,
        "operations": operations,
        "searches": searches,
        "candidates_per_step": draw(st.sampled_from([1, 3, 64])),
    }


SCENARIO = scenarios()


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    cfg = QRAGConfig(
        base_model=str(tiny_bert_dir), position_mode=PositionMode.RELATIVE, relative_step=4
    )
    return QRAGModel.from_base(cfg).eval()


class Corpus:
    """One search path's retriever and what this test wrote into it (ids -> metadata)."""

    def __init__(self, path: str, model: QRAGModel, folder: Path, candidates_per_step: int) -> None:
        self.path, self.model, self.folder = path, model, folder
        self.meta: dict[str, dict[str, Any]] = {}
        self.next_id = 0
        self.store: Any = None
        self.store_options: dict[str, Any] = {"candidates_per_step": candidates_per_step}
        if path == "qdrant":
            self.store, self.store_options["collection_name"] = QdrantClient(":memory:"), "facts"
        elif path == "langchain":
            self.store = InMemoryVectorStore(embedding=QRAGEmbeddings(model))
        elif path == "llama_index":
            self.store = SimpleVectorStore()
        self.retriever = self._open()

    def _open(self) -> QRAGRetriever:
        if self.store is None:
            return QRAGRetriever(
                model=self.model, faiss_candidates=2 if self.path == "faiss" else None
            )
        return QRAGRetriever.from_store(self.store, model=self.model, **self.store_options)

    def add(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        ids = [f"c{self.next_id + i}" for i in range(len(rows))]
        self.next_id += len(rows)
        self.retriever.add_texts([t for t, _ in rows], metadatas=[m for _, m in rows], ids=ids)
        self.meta.update({i: m for i, (_, m) in zip(ids, rows)})

    def delete(self, picks: list[int]) -> None:
        alive = sorted(self.meta)
        if not alive:
            return
        gone = sorted({alive[p % len(alive)] for p in picks})
        assert self.retriever.delete(gone)
        for i in gone:
            del self.meta[i]

    def save_load(self) -> None:
        """Save and load back: the retriever's own save, or the store's (Qdrant in memory: reopened)."""
        target = self.folder / f"save-{self.next_id}"
        if self.path in ("memory", "faiss"):
            self.retriever.save(target)
            self.retriever = QRAGRetriever.load(target)
            if self.path == "faiss":
                self.retriever = QRAGRetriever(
                    model=self.retriever.model, index=self.retriever.index, faiss_candidates=2
                )
        elif self.path == "langchain":
            self.store.dump(str(target))
            self.store = InMemoryVectorStore.load(str(target), embedding=QRAGEmbeddings(self.model))
        elif self.path == "llama_index":
            self.store.persist(persist_path=str(target))
            self.store = SimpleVectorStore.from_persist_path(str(target))
        self.retriever = self._open() if self.store is not None else self.retriever

    def native(self, flt: Any) -> Any:
        """The filter as this path takes it (a callable on a Document for LangChain's store)."""
        if not isinstance(flt, CallableFilter):
            return flt
        if self.path == "langchain":
            return lambda doc: flt.on_metadata(doc.metadata)
        return flt.on_metadata

    def run(self, search: Search) -> list[list[str]]:
        """Chunk ids each question got."""
        flt, r = self.native(search.flt), self.retriever
        options = {"k": search.k, "filter": flt, "stop_threshold": search.stop_threshold}
        if (
            self.path == "faiss"
        ):  # the core searcher, with FAISS pre-selection from the first chunk on
            searcher = MultiStepSearcher(
                r.model, r.index, SearchSettings(faiss_candidates=2, faiss_min_size=1)
            )
            searcher.search(search.questions, search.k)  # the pre-selection itself, unfiltered
            return [
                [h.chunk.id for h in hits] for hits in searcher.search(search.questions, **options)
            ]
        if search.how == "invoke":
            return [[d.id for d in r.invoke(q, **options)] for q in search.questions]
        if search.how == "batch":
            return [[d.id for d in docs] for docs in r.batch(search.questions, **options)]
        if search.how == "retrieve":
            return [[n.node.node_id for n in r.retrieve(q, **options)] for q in search.questions]
        return [[h.chunk.id for h in hits] for hits in r.search(search.questions, **options)]


def check_promise(model: QRAGModel, path: str, scenario: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        corpus = Corpus(path, model, Path(folder), scenario["candidates_per_step"])
        corpus.add(scenario["first"])
        for op, arg in scenario["operations"]:
            {"add": corpus.add, "delete": corpus.delete, "save_load": lambda _: corpus.save_load()}[
                op
            ](arg)
        for search in scenario["searches"]:
            check_search(corpus, search)


def check_search(corpus: Corpus, search: Search) -> None:
    try:
        got = corpus.run(search)
    except QRAGError as exc:
        # only a store may refuse a filter, and only a callable
        assert corpus.path in ("qdrant", "llama_index"), exc
        assert isinstance(search.flt, CallableFilter), exc
        event(f"{corpus.path}: filter refused")
        return
    assert corpus.path in CALLABLE_OK or not isinstance(search.flt, CallableFilter)
    matching = {i for i, meta in corpus.meta.items() if inside(meta, search.flt)}
    for ids in got:
        assert len(ids) == len(set(ids)) <= search.k
        outside = [(i, corpus.meta.get(i, "deleted")) for i in ids if i not in matching]
        assert not outside, f"returned outside {search.flt!r}: {outside}"
        if corpus.path in COMPLETE and search.stop_threshold is None:
            assert len(ids) == min(search.k, len(matching))
            if search.k >= len(matching):
                assert set(ids) == matching
    event(f"{corpus.path}: k {'>=' if search.k >= len(matching) else '<'} matching chunks")
    event(
        f"{corpus.path}: {min(len(matching), 3)}{'+' if len(matching) >= 3 else ''} matching chunks"
    )
    event(f"{corpus.path}: {'some' if any(got) else 'no'} chunks returned")


@pytest.mark.parametrize("path", PATHS)
@FAST
@given(scenario=SCENARIO)
def test_filter_promise(model: QRAGModel, path: str, scenario: dict[str, Any]) -> None:
    check_promise(model, path, scenario)


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
@LONG
@given(scenario=SCENARIO)
def test_filter_promise_long(model: QRAGModel, path: str, scenario: dict[str, Any]) -> None:
    check_promise(model, path, scenario)


# -- what the properties look for, spelled out -----------------------------------------------------------
@pytest.mark.parametrize("path", ["qdrant", "llama_index", "langchain", "memory"])
def test_a_store_that_matches_more_than_the_filter_never_returns_the_extra_chunks(
    model: QRAGModel, path: str
) -> None:
    """Qdrant matches ``{"x": "a"}`` against a list holding ``"a"`` and ``{"x.y": 1}`` against a
    nested field; the in-memory filter does neither. The store-backed search re-checks every
    candidate, so it returns what the in-memory search returns, even with ``k`` above that."""
    with tempfile.TemporaryDirectory() as folder:
        corpus = Corpus(path, model, Path(folder), candidates_per_step=1)
        corpus.add(
            [
                (BABI_TEXTS[0], {"x": ["a", "b"]}),
                (BABI_TEXTS[1], {"x": "a"}),
                (BABI_TEXTS[2], {"x": {"y": 1}}),
                (BABI_TEXTS[3], {"x": "b"}),
            ]
        )
        for flt, want in [({"x": "a"}, {"c1"}), ({"x": ["a"]}, {"c1"}), ({"x.y": 1}, set())]:
            for how in ("invoke", "batch"):
                got = corpus.run(Search(flt, 4, None, how, [BABI_QUESTIONS[0], BABI_QUESTIONS[1]]))
                assert [set(ids) for ids in got] == [want, want], (flt, how)


@pytest.mark.parametrize("path", ["qdrant", "llama_index"])
def test_a_filter_a_store_cannot_express_is_refused_even_when_the_store_is_empty(
    model: QRAGModel, path: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        corpus = Corpus(path, model, Path(folder), candidates_per_step=1)
        for flt in (CallableFilter(frozenset({"'a'"})), {"x": {"$like": "a%"}}):
            with pytest.raises(QRAGError):
                corpus.run(Search(flt, 1, None, "invoke", [BABI_QUESTIONS[0]]))
