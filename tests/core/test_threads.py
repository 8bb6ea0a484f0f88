"""The threads of a search: one validated setting, one thread for a lone question by default, the
count reaching every library the search runs, torch's count as it was after, the same picks."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch
from langchain_core.vectorstores import InMemoryVectorStore
from search_reference import QUERIES

from qrag_integrations import QRAGRetriever
from qrag_integrations.core import compact_scan
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.onnx_backend import OnnxEncoder
from qrag_integrations.core.openvino_backend import OpenVinoEncoder
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings
from qrag_integrations.core.threads import ONE_THREAD_BELOW, threads_in_search
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

#: torch's count outside the searches of these tests: neither 1 nor 2, so a count a search set
#: and failed to restore shows.
OUTSIDE = 3
BATCH = [f"question {i} about chunk {3 * i}" for i in range(ONE_THREAD_BELOW)]


@pytest.fixture(autouse=True)
def outside_count() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(OUTSIDE)
    yield
    torch.set_num_threads(before)


def big_index(n: int = 3000, seed: int = 0) -> ChunkIndex:
    """Random embeddings of ``n`` chunks in 10 documents: enough rows for a threaded scan."""
    g = torch.Generator().manual_seed(seed)
    index = ChunkIndex(32)
    ids = [f"c{i}" for i in range(n)]
    docs = [f"d{i * 10 // n}" for i in range(n)]
    index.add([f"chunk {i}" for i in ids], torch.randn(n, 32, generator=g), ids=ids, doc_ids=docs)
    return index


def counts_inside(
    model: QRAGModel, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, int | None]]:
    """``(torch's count, the search's count)`` at each state encoding of ``model``."""
    seen: list[tuple[int, int | None]] = []
    real = model.embed_states

    def spy(texts, batch_size=32):
        seen.append((torch.get_num_threads(), threads_in_search()))
        return real(texts, batch_size)

    monkeypatch.setattr(model, "embed_states", spy)
    return seen


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_threads_is_none_or_a_positive_integer(bad: object, tiny_bert_dir: Path) -> None:
    with pytest.raises(QRAGError, match="threads must be None or an integer >= 1"):
        SearchSettings(threads=bad)  # type: ignore[arg-type]
    with pytest.raises(QRAGError, match="threads must be None or an integer >= 1"):
        QRAGRetriever(checkpoint=str(tiny_bert_dir), threads=bad)
    assert SearchSettings(threads=3).threads == 3 and SearchSettings().threads is None


@pytest.mark.parametrize(
    ("threads", "questions", "inside"),
    [(None, 1, 1), (None, ONE_THREAD_BELOW - 1, 1), (None, ONE_THREAD_BELOW, OUTSIDE), (2, 1, 2)],
)
def test_a_search_runs_on_its_count_and_leaves_torch_as_it_was(
    make_model: Callable[[str], QRAGModel],
    monkeypatch: pytest.MonkeyPatch,
    threads: int | None,
    questions: int,
    inside: int,
) -> None:
    model = make_model("relative")
    seen = counts_inside(model, monkeypatch)
    searcher = MultiStepSearcher(model, big_index(), SearchSettings(threads=threads))
    searcher.search(BATCH[:questions], k=3)
    searcher.search_each(BATCH[:questions], [big_index(50)] * questions, k=2)
    assert seen and set(seen) == {(inside, inside)}
    assert torch.get_num_threads() == OUTSIDE and threads_in_search() is None


def test_a_failed_search_leaves_torch_as_it_was(
    make_model: Callable[[str], QRAGModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model("relative")

    def fail(*args, **kwargs):
        assert torch.get_num_threads() == 1
        raise RuntimeError("encoder broke")

    monkeypatch.setattr(model, "embed_states", fail)
    with pytest.raises(RuntimeError, match="encoder broke"):
        MultiStepSearcher(model, big_index()).search(["where"], k=2)
    assert torch.get_num_threads() == OUTSIDE and threads_in_search() is None


def test_searches_side_by_side_leave_every_thread_as_it_was(
    make_model: Callable[[str], QRAGModel],
) -> None:
    model = make_model("relative")
    index = big_index()
    searchers = [MultiStepSearcher(model, index, SearchSettings(threads=t)) for t in (None, 2, 1)]
    alone = {id(s): s.search(QUERIES, k=3) for s in searchers}
    start = threading.Barrier(6)

    def search(searcher: MultiStepSearcher) -> bool:
        start.wait()  # fresh pool threads, their first torch call inside another search
        return all(searcher.search(QUERIES, k=3) == alone[id(searcher)] for _ in range(3))

    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(search, searchers * 2))
    assert torch.get_num_threads() == OUTSIDE
    fresh: list[int] = []
    later = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    later.start()
    later.join()
    assert fresh == [OUTSIDE]  # the count new threads start with is as it was too


def test_explicit_threads_reach_faiss_and_simsimd(
    make_model: Callable[[str], QRAGModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    import faiss

    model = make_model("none")
    seen: dict[str, list[int]] = {"simsimd": [], "faiss": []}
    real_dots, real_knn = compact_scan._int8_dots, faiss.knn_hamming

    def dots(q8, codes, threads: int):
        seen["simsimd"].append(threads)
        return real_dots(q8, codes, threads)

    def knn(*args):
        seen["faiss"].append(faiss.omp_get_max_threads())
        return real_knn(*args)

    monkeypatch.setattr(compact_scan, "_int8_dots", dots)
    monkeypatch.setattr(faiss, "knn_hamming", knn)
    for threads, expected in ((None, 1), (3, 3)):
        for scan in ("int8", "binary"):
            settings = SearchSettings(scan=scan, rescore=20, threads=threads)
            MultiStepSearcher(model, big_index(), settings).search(["where"], k=2)
        assert seen == {"simsimd": [expected] * 2, "faiss": [expected] * 2}
        seen = {"simsimd": [], "faiss": []}


def test_explicit_threads_reach_the_onnx_and_openvino_encoders(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QRAG_CACHE_DIR", str(tmp_path))
    for backend in ("onnx", "openvino"):
        retriever = QRAGRetriever.from_texts(
            [f"text {i}" for i in range(5)], checkpoint=str(tiny_bert_dir), backend=backend, k=2
        )
        state = retriever.model._inference["state"]  # type: ignore[index]
        assert [n for n, _ in made_now(state)] == [
            OUTSIDE
        ]  # made with the encoder: torch's count outside a search
        retriever.invoke("where")  # a lone question: one thread
        QRAGRetriever(model=retriever.model, index=retriever.index, threads=2).invoke("where")
        if backend == "onnx":
            asked = {n: s.get_session_options().intra_op_num_threads for n, s in made_now(state)}
            assert asked == {OUTSIDE: OUTSIDE, 1: 1, 2: 2}
        else:  # OpenVINO runs at most one thread per core
            asked = {n: int(m.get_property("INFERENCE_NUM_THREADS")) for n, m in made_now(state)}
            assert asked == {n: min(n, os.cpu_count() or 1) for n in (OUTSIDE, 1, 2)}


def made_now(encoder: OnnxEncoder | OpenVinoEncoder) -> list[tuple[int, Any]]:
    """The ONNX Runtime sessions or OpenVINO compiled models ``encoder`` has made, by count."""
    made = encoder.sessions if isinstance(encoder, OnnxEncoder) else encoder.compiled
    return list(made.made().items())


@pytest.mark.parametrize(
    ("mode", "scan"),
    [("relative", "exact"), ("document", "exact"), ("none", "int8"), ("document", "binary")],
)
def test_the_same_picks_on_any_count(
    make_model: Callable[[str], QRAGModel], mode: str, scan: str
) -> None:
    model = make_model(mode)
    index = big_index()
    picks = {}
    for threads in (None, 1, 2):
        searcher = MultiStepSearcher(model, index, SearchSettings(scan=scan, threads=threads))
        hits = searcher.search(BATCH, k=4) + [searcher.search([q], k=4)[0] for q in QUERIES]
        picks[threads] = [[(h.chunk.id, h.position) for h in row] for row in hits]
        q_values = torch.tensor([[h.q_value for h in row] for row in hits])
        if threads is None:
            reference = q_values
        torch.testing.assert_close(q_values, reference, rtol=1e-5, atol=1e-6)
    assert picks[1] == picks[2] == picks[None]


def test_the_same_picks_over_a_store_on_any_count(tiny_bert_dir: Path) -> None:
    texts = [f"text {i} of the store, about {i % 7}" for i in range(60)]
    model = QRAGRetriever(checkpoint=str(tiny_bert_dir)).model
    picks = {}
    for threads in (None, 1, 2):
        retriever = QRAGRetriever.from_store(
            InMemoryVectorStore(embedding=QRAGEmbeddings(model)), model=model, k=3, threads=threads
        )
        retriever.add_texts(texts, ids=[f"c{i}" for i in range(len(texts))])
        assert retriever.threads == threads
        picks[threads] = [[h.chunk.id for h in row] for row in retriever.search(BATCH + QUERIES)]
        picks[threads] += [[d.id for d in retriever.invoke(q)] for q in QUERIES]
        assert torch.get_num_threads() == OUTSIDE
    assert picks[1] == picks[2] == picks[None]


def test_a_saved_retriever_keeps_its_threads(tiny_bert_dir: Path, tmp_path: Path) -> None:
    retriever = QRAGRetriever.from_texts(["a", "b", "c"], checkpoint=str(tiny_bert_dir), threads=2)
    retriever.save(tmp_path / "saved")
    loaded = QRAGRetriever.load(tmp_path / "saved")
    assert loaded.threads == 2 and loaded.corpus.searcher.settings.threads == 2  # type: ignore[attr-defined]
