"""One ``QRAGRetriever`` used from many threads: searches agree with sequential ones, and
searches and saves running while the corpus changes never crash, return only real chunks and
see one state of the index at a time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS, build_retriever, chunk_ids

from qrag_integrations import QRAGRetriever
from qrag_integrations.core.chunks import document_sort_key

QUESTIONS = list(BABI_QUESTIONS)
TEXTS = list(BABI_TEXTS)
IDS = chunk_ids(TEXTS)


def summary(docs) -> list[tuple[str, str, int, int]]:
    return [
        (d.id, d.page_content, d.metadata["qrag_step"], d.metadata["qrag_position"]) for d in docs
    ]


def q_values(docs) -> list[float]:
    return [d.metadata["qrag_q_value"] for d in docs]


@pytest.fixture
def retriever(tiny_bert_dir) -> QRAGRetriever:
    return build_retriever(tiny_bert_dir, TEXTS, ids=IDS, k=3)


def test_threads_get_the_same_results_as_sequential_calls(retriever):
    expected = {q: retriever.invoke(q) for q in QUESTIONS}

    def worker(t: int) -> list[tuple[str, list]]:
        out = []
        for i in range(10):
            q = QUESTIONS[(t + i) % len(QUESTIONS)]
            out.append((q, retriever.invoke(q)))
        return out

    with ThreadPoolExecutor(max_workers=8) as pool:
        per_thread = list(pool.map(worker, range(8)))

    assert sum(len(x) for x in per_thread) == 80
    for results in per_thread:
        for q, docs in results:
            assert summary(docs) == summary(expected[q])
            assert q_values(docs) == pytest.approx(q_values(expected[q]), rel=1e-6, abs=1e-7)


def test_adds_and_deletes_while_other_threads_search(retriever):
    added = {f"new-{i}": f"Emma went to the city number {i}." for i in range(30)}
    text_of = dict(zip(IDS, TEXTS)) | added
    done = threading.Event()

    def writer() -> None:
        try:
            items = list(added.items())
            for start in range(0, len(items), 3):
                batch = items[start : start + 3]
                retriever.add_texts([t for _, t in batch], ids=[i for i, _ in batch])
                if start % 2 == 0:
                    retriever.delete([batch[0][0]])
        finally:
            done.set()  # an error still stops the readers; .result() below re-raises it

    def reader(t: int) -> list[list]:
        seen = []
        while not done.is_set() or len(seen) < 3:
            seen.append(retriever.invoke(QUESTIONS[t % len(QUESTIONS)]))
        return seen

    with ThreadPoolExecutor(max_workers=5) as pool:
        readers = [pool.submit(reader, t) for t in range(4)]
        pool.submit(writer).result()
        all_results = [r.result() for r in readers]

    assert sum(len(x) for x in all_results) >= 12
    for results in all_results:
        for docs in results:
            assert [d.metadata["qrag_step"] for d in docs] == [1, 2, 3]
            ids = [d.id for d in docs]
            assert len(set(ids)) == 3
            for d in docs:
                assert d.id in text_of and d.page_content == text_of[d.id]
    deleted = {f"new-{i}" for i in range(0, 30, 6)}
    # each text its own document, documents in natural order of their ids
    kept = IDS + [i for i in added if i not in deleted]
    assert retriever.index.ids == sorted(kept, key=document_sort_key)
    assert len(retriever) == len(TEXTS) + 30 - len(deleted)


def test_invoke_add_delete_and_save_at_once(retriever, tmp_path):
    """Searches, adds, deletes and saves on one retriever from five threads: no exception, each
    search's results come from one state of the index, and each save (to its own folder or all
    to one) loads as exactly one state."""
    states = [list(IDS)]  # the writer's states in order; each add or delete is one swap
    text_of = dict(zip(IDS, TEXTS))
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(12):
                new = {
                    f"w{i}a": f"Emma went to the city number {i}.",
                    f"w{i}b": f"Fred took the apple {i}.",
                }
                text_of.update(new)
                retriever.add_texts(list(new.values()), ids=list(new))
                states.append(states[-1] + list(new))
                if i % 2:
                    gone = states[-1][len(IDS) + i]
                    retriever.delete([gone])
                    states.append([x for x in states[-1] if x != gone])
        finally:
            done.set()

    def reader(t: int) -> list[list[str]]:
        seen = []
        while not done.is_set() or len(seen) < 3:
            docs = retriever.invoke(QUESTIONS[t % len(QUESTIONS)])
            assert all(d.page_content == text_of[d.id] for d in docs)
            seen.append([d.id for d in docs])
        return seen

    def saver(name: str) -> list[Path]:
        folders = []
        while not done.is_set() or not folders:
            folder = tmp_path / (name if name == "shared" else f"{name}-{len(folders)}")
            retriever.save(folder)
            folders.append(folder)
        return folders

    with ThreadPoolExecutor(max_workers=5) as pool:
        readers = [pool.submit(reader, t) for t in range(2)]
        savers = [pool.submit(saver, name) for name in ("own", "shared")]
        pool.submit(writer).result()
        searches = [ids for r in readers for ids in r.result()]
        folders = [f for s in savers for f in s.result()]

    assert retriever.index.ids == states[-1]
    as_sets = [set(s) for s in states]
    for ids in searches:
        assert len(ids) == len(set(ids)) == 3 and any(set(ids) <= s for s in as_sets), ids
    for folder in set(folders):
        loaded = QRAGRetriever.load(folder)
        assert loaded.index.ids in states
        assert all(c.text == text_of[c.id] for c in loaded.index.snapshot().chunks)
    assert (
        sorted(p.name for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name) == []
    )
