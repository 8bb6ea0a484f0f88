"""Every documented option, set on a built or loaded retriever (in memory or over a store) or
passed to ``load``, takes effect or raises naming why: none is accepted and ignored."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.vectorstores import InMemoryVectorStore

from qrag_integrations import QRAGRetriever
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "retriever.md"
TEXTS = [f"{w} note {i}" for i, w in enumerate(["apple", "river", "garden", "kitchen"] * 3)]
METAS = [{"doc": "A" if i % 2 else "B"} for i in range(len(TEXTS))]
QUESTION = "where is the apple"
#: A checker reads the retriever after the option was set to the value beside it.
Check = Callable[[QRAGRetriever, Any], bool]


def _added(r: QRAGRetriever, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the next add passes to the corpus (batch size, progress)."""
    seen: dict[str, Any] = {}
    add = r.corpus.add

    def spy(texts, metas, ids, doc_ids, batch_size, progress, replace=False):  # type: ignore[no-untyped-def]
        seen.update(batch_size=batch_size, progress=progress, doc_ids=doc_ids)
        return add(texts, metas, ids, doc_ids, batch_size, progress, replace=replace)

    monkeypatch.setattr(r.corpus, "add", spy)
    r.add_texts(["a new note"], metadatas=[{"topic": "T", "source": "S"}])
    return seen


def _rules(r: QRAGRetriever, **rules: Any) -> bool:
    return r.policy == SearchPolicy.of(r.model.config, **rules)


def _settings(r: QRAGRetriever, name: str, value: Any) -> bool:
    return getattr(r.corpus.searcher.settings, name) == value


#: Each documented option: a value other than its default, and what shows it in effect
#: (``None``: it must raise on this kind of retriever).
IN_MEMORY: dict[str, tuple[Any, Check | None]] = {
    "k": (2, lambda r, v: len(r.invoke(QUESTION)) == v),
    "stop_threshold": (1e9, lambda r, v: r.invoke(QUESTION) == []),
    "filter": ({"doc": "A"}, lambda r, v: {d.metadata["doc"] for d in r.invoke(QUESTION)} == {"A"}),
    "checkpoint": ("packaged:all-MiniLM-L6-v2", None),
    "device": ("meta", None),
    "index_dtype": ("float16", None),
    "batch_size": (7, None),  # checked by add (below)
    "show_progress": (False, None),
    "document_key": ("topic", None),
    "backend": ("onnx", lambda r, v: r.model.inference_backend == ("onnx", None)),
    "quantize": ("bf16", lambda r, v: r.model.inference_backend == ("torch", "bf16")),
    "threads": (1, lambda r, v: _settings(r, "threads", v)),
    "scan": ("int8", lambda r, v: _settings(r, "scan", v)),
    "rescore": (50, lambda r, v: _settings(r, "rescore", v)),
    "faiss_candidates": (5, lambda r, v: _settings(r, "faiss_candidates", v)),
    "lexical_depth": (3, lambda r, v: _rules(r, lexical_depth=v)),
    "lexical_steps": (2, lambda r, v: _rules(r, lexical_steps=v)),
    "lexical_gap": (0.5, lambda r, v: _rules(r, lexical_gap=v)),
    "lexical_weight": (0.7, lambda r, v: _rules(r, lexical_weight=v)),
    "supersede": (False, lambda r, v: _rules(r, supersede=v)),
    "candidates_per_step": (9, None),
    "check_exact": (True, None),
}
#: Read at add time, checked by :func:`_added`.
AT_ADD = {"batch_size": "batch_size", "show_progress": "progress", "document_key": "doc_ids"}
#: Over a store: its own candidates count; the in-memory index's options raise.
STORE: dict[str, tuple[Any, Check | None]] = {
    **IN_MEMORY,
    "scan": ("int8", None),
    "rescore": (50, None),
    "faiss_candidates": (5, None),
    "document_key": ("topic", None),
    "threads": (1, lambda r, v: r.corpus.searcher.threads == v),
    "candidates_per_step": (9, lambda r, v: r.corpus.searcher.candidates_per_step == v),
    "check_exact": (True, lambda r, v: r.corpus.searcher.check_exact == v),
}


def documented_options() -> set[str]:
    """The names of docs/retriever.md's option table (the table under ``| option | default |``)."""
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("| option | default | what it does |", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \| ", table, flags=re.MULTILINE))


def test_every_documented_option_is_covered() -> None:
    documented = documented_options()
    assert documented <= set(QRAGRetriever.model_fields)
    assert documented == set(IN_MEMORY) == set(STORE)


@pytest.fixture
def model(tiny_bert_dir: Path) -> QRAGModel:
    """A model of its own (a backend set here must not reach other tests' shared models)."""
    return QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()


def _in_memory(model: QRAGModel, tmp_path: Path, kind: str) -> QRAGRetriever:
    r = QRAGRetriever.from_texts(TEXTS, metadatas=METAS, model=model, k=4)
    if kind == "built":
        return r
    r.save(tmp_path / "saved")
    return QRAGRetriever.load(tmp_path / "saved")


@pytest.mark.parametrize("kind", ["built", "loaded"])
@pytest.mark.parametrize("name", sorted(IN_MEMORY))
def test_an_option_set_on_an_in_memory_retriever_takes_effect_or_raises(
    model: QRAGModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, name: str
) -> None:
    r = _in_memory(model, tmp_path, kind)
    value, check = IN_MEMORY[name]
    before = getattr(r, name)
    if check is None and name not in AT_ADD:
        with pytest.raises(QRAGError, match=name):
            setattr(r, name, value)
        assert getattr(r, name) == before  # left as it was
        return
    setattr(r, name, value)
    if name in AT_ADD:
        seen = _added(r, monkeypatch)[AT_ADD[name]]
        assert seen == (["T"] if name == "document_key" else value)
    else:
        assert check is not None and check(r, value)


#: ``load``'s own ``device`` loads the saved retriever there.
AT_LOAD = {**IN_MEMORY, "device": ("cpu", lambda r, v: r.index.device.type == v)}


@pytest.mark.parametrize("name", sorted(AT_LOAD))
def test_load_takes_every_option_as_setting_it_after_loading(
    model: QRAGModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    _in_memory(model, tmp_path, "built").save(tmp_path / "saved")
    value, check = AT_LOAD[name]
    if check is None and name not in AT_ADD:
        with pytest.raises(QRAGError, match=name):
            QRAGRetriever.load(tmp_path / "saved", **{name: value})
        return
    r = QRAGRetriever.load(tmp_path / "saved", **{name: value})
    if name in AT_ADD:
        seen = _added(r, monkeypatch)[AT_ADD[name]]
        assert seen == (["T"] if name == "document_key" else value)
    else:
        assert check is not None and check(r, value)


@pytest.mark.parametrize("name", sorted(STORE))
def test_an_option_set_on_a_store_backed_retriever_takes_effect_or_raises(
    model: QRAGModel, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    store = InMemoryVectorStore(embedding=QRAGEmbeddings(model))
    r = QRAGRetriever.from_store(store, model=model, k=4)
    r.add_texts(TEXTS, metadatas=METAS)
    value, check = STORE[name]
    if (check is None and name not in AT_ADD) or name == "document_key":
        before = getattr(r, name)
        with pytest.raises(QRAGError, match=name):
            setattr(r, name, value)
        assert getattr(r, name) == before
        return
    setattr(r, name, value)
    if name in AT_ADD:
        seen = _added(r, monkeypatch)[AT_ADD[name]]
        assert seen == value
    else:
        assert check is not None and check(r, value)


def test_a_value_the_constructor_refuses_is_refused_and_leaves_the_retriever(
    model: QRAGModel,
) -> None:
    r = QRAGRetriever.from_texts(TEXTS, model=model, k=3)
    for name, bad in [("k", "3"), ("k", 0), ("threads", 0), ("scan", "int4"), ("lexical_gap", -1)]:
        before = getattr(r, name)
        with pytest.raises(ValueError, match=name):
            setattr(r, name, bad)
        assert getattr(r, name) == before
    with pytest.raises(QRAGError, match="unknown option"):
        QRAGRetriever.load("nowhere", kk=2)
