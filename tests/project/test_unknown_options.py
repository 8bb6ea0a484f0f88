"""Nothing silently ignored: a keyword option nobody reads raises ``UnknownOptionError`` (a
``QRAGError`` and a ``TypeError``) naming it and the closest valid option, at every entry point
that takes options; LangChain's own keywords and the deprecated ``where=`` keep working."""

from __future__ import annotations

import asyncio
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from qrag_training.evaluate import main as qrag_eval
from qrag_training.train import main as qrag_train
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS, build_retriever, chunk_ids

from qrag_integrations import MultiStepSearcher, QRAGError, QRAGRetriever
from qrag_integrations.core.errors import UnknownOptionError
from qrag_integrations.core.validation import check_options
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings, QRAGLlamaEmbedding
from qrag_integrations.llm.factory import build_reader

QUESTION = BABI_QUESTIONS[0]


@pytest.fixture(scope="module")
def retriever(tiny_bert_dir: Path) -> QRAGRetriever:
    metas = [{"tenant": "a" if i % 2 else "b"} for i in range(6)]
    return build_retriever(
        tiny_bert_dir, BABI_TEXTS[:6], metadatas=metas, ids=chunk_ids(BABI_TEXTS[:6]), k=3
    )


def entry_points(
    r: QRAGRetriever, ckpt: str
) -> dict[str, tuple[Callable[..., Any], str, str | None]]:
    """``name -> (call taking the misspelled option as keywords, misspelling, suggestion)``."""
    nodes = [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(BABI_TEXTS[:3])]
    model = r.model
    return {
        "QRAGRetriever()": (
            lambda **kw: QRAGRetriever(model=model, **kw),
            "stop_treshold",
            "stop_threshold",
        ),
        "from_texts": (
            lambda **kw: QRAGRetriever.from_texts(["a"], checkpoint=ckpt, **kw),
            "bakend",
            "backend",
        ),
        "from_documents": (
            lambda **kw: QRAGRetriever.from_documents(
                [Document(page_content="a")], checkpoint=ckpt, **kw
            ),
            "text_spliter",
            "text_splitter",
        ),
        "from_nodes": (
            lambda **kw: QRAGRetriever.from_nodes(nodes, model=model, **kw),
            "fitler",
            "filter",
        ),
        "from_llama_index": (
            lambda **kw: QRAGRetriever.from_llama_index(
                VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8)), model=model, **kw
            ),
            "devce",
            "device",
        ),
        "from_vector_store": (
            lambda **kw: QRAGRetriever.from_vector_store(
                InMemoryVectorStore(QRAGEmbeddings(model)), ids=[], model=model, **kw
            ),
            "batchsize",
            "batch_size",
        ),
        "from_store": (
            lambda **kw: QRAGRetriever.from_store(SimpleVectorStore(), model=model, **kw),
            "candidates_per_stp",
            "candidates_per_step",
        ),
        "from_qdrant": (
            lambda **kw: QRAGRetriever.from_qdrant("facts", model=model, **kw),
            "rank",
            "rank_by",
        ),
        "invoke": (lambda **kw: r.invoke(QUESTION, **kw), "filters", "filter"),
        "ainvoke": (lambda **kw: asyncio.run(r.ainvoke(QUESTION, **kw)), "kk", "k"),
        "batch": (
            lambda **kw: r.batch([QUESTION, BABI_QUESTIONS[1]], **kw),
            "stop_treshold",
            "stop_threshold",
        ),
        "abatch": (lambda **kw: asyncio.run(r.abatch([QUESTION], **kw)), "where", "filter"),
        "retrieve": (lambda **kw: r.retrieve(QUESTION, **kw), "top_k", "k"),
        "aretrieve": (lambda **kw: asyncio.run(r.aretrieve(QUESTION, **kw)), "filtre", "filter"),
        "add_documents": (
            lambda **kw: r.add_documents([Document(page_content="a")], **kw),
            "text_spliter",
            "text_splitter",
        ),
        "delete": (lambda **kw: r.delete(["nope"], **kw), "id", "ids"),
        "QRAGEmbeddings()": (lambda **kw: QRAGEmbeddings(model, **kw), "bach_size", "batch_size"),
        "QRAGEmbeddings.from_checkpoint": (
            lambda **kw: QRAGEmbeddings.from_checkpoint(ckpt, **kw),
            "devise",
            "device",
        ),
        "QRAGLlamaEmbedding()": (
            lambda **kw: QRAGLlamaEmbedding(model, **kw),
            "embed_bach_size",
            "embed_batch_size",
        ),
        "QRAGLlamaEmbedding.from_checkpoint": (
            lambda **kw: QRAGLlamaEmbedding.from_checkpoint(ckpt, **kw),
            "model_nme",
            "model_name",
        ),
        "build_reader(local)": (
            lambda **kw: build_reader("local", **kw),
            "max_new_token",
            "max_new_tokens",
        ),
        "build_reader(openai)": (
            lambda **kw: build_reader("openai:http://localhost:1/v1#m", **kw),
            "timeout",
            "timeout_s",
        ),
        "build_reader(vllm)": (
            lambda **kw: build_reader("vllm:some/model", **kw),
            "max_new_tokens",
            "max_tokens",
        ),
    }


ENTRY_POINTS = [
    "QRAGRetriever()",
    "from_texts",
    "from_documents",
    "from_nodes",
    "from_llama_index",
    "from_vector_store",
    "from_store",
    "from_qdrant",
    "invoke",
    "ainvoke",
    "batch",
    "abatch",
    "retrieve",
    "aretrieve",
    "add_documents",
    "delete",
    "QRAGEmbeddings()",
    "QRAGEmbeddings.from_checkpoint",
    "QRAGLlamaEmbedding()",
    "QRAGLlamaEmbedding.from_checkpoint",
    "build_reader(local)",
    "build_reader(openai)",
    "build_reader(vllm)",
]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_an_unknown_option_is_refused_naming_it_and_the_closest_valid_one(
    retriever, tiny_bert_dir, entry
):
    call, name, close = entry_points(retriever, str(tiny_bert_dir))[entry]
    with pytest.raises(UnknownOptionError) as caught:
        call(**{name: 1})
    assert isinstance(caught.value, QRAGError) and isinstance(caught.value, TypeError)
    message = str(caught.value)
    assert f"unknown option `{name}`" in message and "valid options:" in message
    if close is None:
        assert "did you mean" not in message
    else:
        assert f"(did you mean `{close}`?)" in message


def test_every_entry_point_is_tested(retriever, tiny_bert_dir):
    assert sorted(entry_points(retriever, str(tiny_bert_dir))) == sorted(ENTRY_POINTS)


def test_a_misspelled_filter_no_longer_returns_every_tenant(retriever):
    assert {d.metadata["tenant"] for d in retriever.invoke(QUESTION, filter={"tenant": "a"})} == {
        "a"
    }
    with pytest.raises(
        UnknownOptionError, match=re.escape("unknown option `filters` (did you mean `filter`?)")
    ):
        retriever.invoke(QUESTION, filters={"tenant": "a"})


def test_several_unknown_options_are_named_together(retriever):
    with pytest.raises(
        UnknownOptionError,
        match=r"got unknown options `kk` \(did you mean `k`\?\), `xyz`; "
        r"valid options: filter, k, stop_threshold$",
    ):
        retriever.invoke(QUESTION, kk=2, xyz=1)


def test_langchain_keywords_still_work(retriever):
    class Seen(BaseCallbackHandler):
        runs: ClassVar[list[str]] = []

        def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
            self.runs.append(kwargs.get("name") or "")

    handler = Seen()
    config = {"callbacks": [handler], "tags": ["t"], "metadata": {"m": 1}, "run_name": "qrag-run"}
    want = [d.id for d in retriever.invoke(QUESTION, k=2)]
    assert [d.id for d in retriever.invoke(QUESTION, config, k=2)] == want
    assert [
        d.id
        for d in retriever.invoke(
            QUESTION,
            config=config,
            k=2,
            tags=["x"],
            metadata={},
            callbacks=None,
            run_name="r",
            run_id=None,
            verbose=False,
        )
    ] == want
    assert [
        [d.id for d in docs] for docs in retriever.batch([QUESTION], config, k=2, max_concurrency=1)
    ] == [want]
    assert [
        d.id for d in asyncio.run(retriever.ainvoke(QUESTION, config, k=2, recursion_limit=5))
    ] == want
    assert handler.runs[:2] == ["qrag-run", "qrag-run"]


def test_per_call_options_of_retrieve_are_applied(retriever):
    nodes = retriever.retrieve(QUESTION, k=2, filter={"tenant": "b"})
    assert len(nodes) == 2 and {n.node.metadata["tenant"] for n in nodes} == {"b"}
    assert [
        n.node.node_id
        for n in asyncio.run(retriever.aretrieve(QUESTION, k=2, filter={"tenant": "b"}))
    ] == [n.node.node_id for n in nodes]
    assert len(asyncio.run(retriever.aretrieve(QUESTION, stop_threshold=float("inf")))) == 0
    assert len(retriever.retrieve(QUESTION)) == retriever.k  # the options were for those calls only


def test_the_deprecated_where_still_works_with_its_warning(retriever):
    searcher = MultiStepSearcher(retriever.model, retriever.index)
    with pytest.warns(DeprecationWarning, match=r"search\(where=\) is deprecated; use filter="):
        old = searcher.search([QUESTION], k=2, where={"tenant": "a"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = searcher.search([QUESTION], k=2, filter={"tenant": "a"})
    assert [h.chunk.id for h in old[0]] == [h.chunk.id for h in new[0]]


def test_a_saved_setting_nobody_reads_is_refused_on_load(retriever, tmp_path):
    import json

    retriever.save(tmp_path / "r")
    settings_file = tmp_path / "r" / "retriever.json"
    saved = json.loads(settings_file.read_text())
    saved["settings"]["stop_treshold"] = 0.5
    del saved["digests"]  # an edit by hand, not damage: the check behind the digests
    settings_file.write_text(json.dumps(saved))
    with pytest.raises(
        QRAGError, match=r"corrupt .*retriever.json: .*unknown option `stop_treshold`"
    ):
        QRAGRetriever.load(tmp_path / "r")


def test_check_options_lists_only_what_is_allowed():
    check_options({"k": 1, "tags": []}, ["k"], "f", passed_on=["tags"])
    with pytest.raises(
        UnknownOptionError,
        match=r"^f got an unknown option `tag` \(did you mean `tags`\?\); valid options: k$",
    ):
        check_options(["tag"], ["k"], "f", passed_on=["tags"])
    with pytest.raises(UnknownOptionError, match="valid options: none"):
        check_options(["x"], [], "g")


# -- qrag-train / qrag-eval: unknown keys are refused before Hydra runs ------------------------------
@pytest.mark.parametrize("override", ["stop_treshold=0.5", "env.tsk=qa1", "algo.lr_typo=1"])
def test_qrag_train_refuses_an_unknown_override(monkeypatch, capsys, tmp_path, override):
    monkeypatch.setattr("sys.argv", ["qrag-train", f"out_dir={tmp_path / 'run'}", override])
    with pytest.raises(SystemExit):
        qrag_train()
    key = override.split("=")[0]
    assert f"unknown setting {key}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_qrag_eval_refuses_an_unknown_override(capsys):
    with pytest.raises(SystemExit) as info:  # one line on stderr, exit status 2 (cli_errors)
        qrag_eval(["--baseline", "bm25", "--set", "env.tsk=qa1", "--n", "1"])
    assert info.value.code == 2
    assert "qrag-eval: error: Could not override 'env.tsk'" in capsys.readouterr().err


def test_qrag_eval_refuses_an_unknown_reader_option(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        qrag_eval(
            [
                "--baseline",
                "none",
                "--reader",
                "local",
                "--reader-option",
                "max_new_token=4",
                "--n",
                "1",
            ]
        )
    assert info.value.code == 2
    assert "`max_new_token` (did you mean `max_new_tokens`?)" in capsys.readouterr().err


def test_no_suggestion_when_nothing_is_close(tiny_bert_dir):
    with pytest.raises(UnknownOptionError) as caught:
        QRAGRetriever.from_texts(["a"], checkpoint=str(tiny_bert_dir), zzz_unrelated=1)
    message = str(caught.value)
    assert "unknown option `zzz_unrelated`" in message and "did you mean" not in message
