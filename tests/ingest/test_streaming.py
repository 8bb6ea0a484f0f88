"""Streaming corpus embedding: shards on disk, resume after a crash, bounded memory, refusals,
and the shards written to Qdrant / a ChunkIndex."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from qdrant_client import QdrantClient

from qrag_integrations import QRAGConfig, QRAGModel
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.ingest import heap
from qrag_integrations.ingest import sharded as streaming
from qrag_integrations.ingest.sharded import (
    MANIFEST,
    CorpusChangedError,
    StreamCacheError,
    cache_folder,
    embed_corpus,
    read_shards,
)
from qrag_integrations.ingest.sharded_store import write_shards
from qrag_integrations.stores.qdrant import QdrantSource

WORDS = [
    "mary",
    "john",
    "went",
    "to",
    "the",
    "kitchen",
    "garden",
    "office",
    "apple",
    "milk",
    "football",
    "picked",
    "up",
    "dropped",
]


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) + f" {i}." for i in range(n)]


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    return QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir)))


class Crash(RuntimeError):
    pass


def crashing(texts: list[str], after: int) -> Iterator[str]:
    """The corpus, dying after ``after`` texts (a killed process, as far as the cache can tell)."""
    for i, text in enumerate(texts):
        if i == after:
            raise Crash
        yield text


def all_embeddings(folder: Path, model: QRAGModel) -> tuple[list[str], torch.Tensor]:
    shards = list(read_shards(folder, model))
    return [i for s in shards for i in s.ids], torch.cat([s.embeddings for s in shards])


def test_resume_after_a_crash_equals_an_uninterrupted_run(tmp_path: Path, model: QRAGModel) -> None:
    texts = corpus(53)
    whole = embed_corpus(model, iter(texts), tmp_path / "a", shard_rows=10, batch_size=4)
    assert (whole.rows, whole.shards, whole.embedded_rows) == (53, 6, 53)
    ids, emb = all_embeddings(whole.folder, model)
    assert ids == [str(i) for i in range(53)]
    torch.testing.assert_close(emb, model.embed_chunks(texts, batch_size=4), rtol=1e-5, atol=1e-6)

    with pytest.raises(Crash):
        embed_corpus(model, crashing(texts, 37), tmp_path / "b", shard_rows=10, batch_size=4)
    folder = cache_folder(tmp_path / "b", model)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert len(manifest["shards"]) == 3 and not manifest["complete"]
    with pytest.raises(StreamCacheError, match="interrupted run"):
        next(read_shards(folder, model))

    seen: list[int] = []
    forward = model.chunk_encoder.forward
    model.chunk_encoder.forward = lambda **kw: (seen.append(len(kw["input_ids"])), forward(**kw))[1]
    try:
        resumed = embed_corpus(model, iter(texts), tmp_path / "b", shard_rows=10, batch_size=4)
    finally:
        del model.chunk_encoder.forward
    assert resumed.embedded_rows == 23 and sum(seen) == 23  # the 3 complete shards were not redone
    ids_b, emb_b = all_embeddings(resumed.folder, model)
    assert ids_b == ids and torch.equal(emb_b, emb)
    # finished: a third call embeds nothing
    assert embed_corpus(model, iter(texts), tmp_path / "b", shard_rows=10).embedded_rows == 0


def test_memory_is_bounded_by_one_shard_and_one_batch(tmp_path: Path, model: QRAGModel) -> None:
    shard_rows, batch = 8, 3
    done = [0]
    ahead: list[int] = []
    batches: list[int] = []

    def texts() -> Iterator[str]:
        for i, text in enumerate(corpus(40)):
            ahead.append(i + 1 - done[0])  # texts read but not yet written to a shard
            yield text

    forward = model.chunk_encoder.forward
    model.chunk_encoder.forward = lambda **kw: (
        batches.append(len(kw["input_ids"])),
        forward(**kw),
    )[1]
    try:
        embed_corpus(
            model,
            texts(),
            tmp_path,
            shard_rows=shard_rows,
            batch_size=batch,
            progress=lambda rows, shards: done.__setitem__(0, rows),
        )
    finally:
        del model.chunk_encoder.forward
    assert max(ahead) == shard_rows and max(batches) == batch and sum(batches) == 40


def test_a_changed_corpus_is_refused(tmp_path: Path, model: QRAGModel) -> None:
    texts = corpus(30)
    with pytest.raises(Crash):
        embed_corpus(model, crashing(texts, 21), tmp_path, shard_rows=10)
    changed = list(texts)
    changed[14] = "someone else's sentence."
    with pytest.raises(CorpusChangedError, match=r"shard 1 \(corpus rows 10-19\)"):
        embed_corpus(model, iter(changed), tmp_path, shard_rows=10)
    with pytest.raises(CorpusChangedError, match="corpus differs"):
        embed_corpus(model, iter(texts), tmp_path, ids=(f"x{i}" for i in range(30)), shard_rows=10)
    with pytest.raises(StreamCacheError, match="shard_rows=10"):
        embed_corpus(model, iter(texts), tmp_path, shard_rows=5)
    embed_corpus(model, iter(texts), tmp_path, shard_rows=10)
    with pytest.raises(CorpusChangedError, match="longer"):
        embed_corpus(model, iter(texts + ["one more."]), tmp_path, shard_rows=10)
    with pytest.raises(CorpusChangedError, match="shorter"):
        embed_corpus(model, iter(texts[:20]), tmp_path, shard_rows=10)


def test_a_damaged_shard_is_refused_with_its_path(tmp_path: Path, model: QRAGModel) -> None:
    result = embed_corpus(model, iter(corpus(30)), tmp_path, shard_rows=10)
    shard = result.folder / "shard-000001.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 100])
    with pytest.raises(StreamCacheError, match=f"damaged shard {shard}"):
        list(read_shards(result.folder, model))
    with pytest.raises(StreamCacheError, match=f"damaged shard {shard}"):
        embed_corpus(model, iter(corpus(30)), tmp_path, shard_rows=10)
    shard.unlink()
    with pytest.raises(StreamCacheError, match=f"shard {shard} is missing"):
        list(read_shards(result.folder, model))


def test_foreign_files_and_other_encoders_are_refused(
    tmp_path: Path, model: QRAGModel, tiny_bert_dir_48: Path
) -> None:
    folder = cache_folder(tmp_path, model)
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(StreamCacheError, match=r"not an embedding stream's: \['notes.txt'\]"):
        embed_corpus(model, iter(corpus(5)), tmp_path)
    assert (folder / "notes.txt").read_text() == "mine"
    (folder / "notes.txt").unlink()
    embed_corpus(model, iter(corpus(5)), tmp_path)
    other = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir_48)))
    with pytest.raises(StreamCacheError, match="another chunk encoder"):
        next(read_shards(folder, other))


def test_shards_feed_qdrant_and_a_chunk_index(tmp_path: Path, model: QRAGModel) -> None:
    texts = corpus(23)
    docs = [f"d{i // 9}" for i in range(23)]
    result = embed_corpus(
        model, iter(texts), tmp_path, ids=(f"c{i}" for i in range(23)), shard_rows=5
    )
    source = QdrantSource(QdrantClient(":memory:"), "corpus", model)
    shards = read_shards(result.folder, model)
    # an interrupted write: the first two shards only, then the whole thing again
    first = [next(shards), next(shards)]
    assert write_shards(source, first, iter(texts), doc_ids=iter(docs)) == 10
    assert (
        write_shards(source, read_shards(result.folder, model), iter(texts), doc_ids=iter(docs))
        == 13
    )
    assert source.count() == 23
    stored = source.get([f"c{i}" for i in range(23)])
    assert [c.text for c in stored] == texts
    assert [(c.doc_id, c.order) for c in stored] == [(d, i % 9) for i, d in enumerate(docs)]
    assert source.doc_info("d2") == (2, 5)
    _, emb = all_embeddings(result.folder, model)
    got = source.candidates(emb[7].numpy(), 23, None)
    by_id = dict(zip((c.id for c in got.chunks), got.vectors))
    np.testing.assert_allclose(
        np.stack([by_id[f"c{i}"] for i in range(23)]), emb.numpy(), rtol=1e-6
    )
    with pytest.raises(CorpusChangedError, match="rows 0-4"):
        write_shards(source, read_shards(result.folder, model), iter(corpus(23, seed=1)))

    index = ChunkIndex(model.embedding_dim)
    rows = iter(texts)
    for shard in read_shards(result.folder, model):
        index.add(
            [next(rows) for _ in shard.ids],
            shard.embeddings,
            ids=shard.ids,
            doc_ids=["doc"] * len(shard.ids),
        )
    assert index.ids == [f"c{i}" for i in range(23)]
    assert torch.equal(index.snapshot().embeddings, emb)


def test_default_document_continues_across_shards_and_a_resumed_write(
    tmp_path: Path, model: QRAGModel
) -> None:
    texts = corpus(12)
    result = embed_corpus(model, iter(texts), tmp_path, shard_rows=5)
    source = QdrantSource(QdrantClient(":memory:"), "one-doc", model)
    shards = read_shards(result.folder, model)
    assert write_shards(source, [next(shards)], iter(texts)) == 5
    assert write_shards(source, read_shards(result.folder, model), iter(texts)) == 7
    stored = source.get([str(i) for i in range(12)])
    assert len({c.doc_id for c in stored}) == 1
    assert [c.order for c in stored] == list(range(12))


def test_freed_memory_is_released_after_every_embedded_shard(
    tmp_path: Path, model: QRAGModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(streaming, "release_freed_memory", lambda: calls.append(1) or False)
    texts = corpus(23)
    with pytest.raises(Crash):
        embed_corpus(model, crashing(texts, 12), tmp_path, shard_rows=5, batch_size=4)
    assert len(calls) == 2  # two shards embedded before the crash
    calls.clear()
    result = embed_corpus(model, iter(texts), tmp_path, shard_rows=5, batch_size=4)
    assert result.embedded_rows == 13 and len(calls) == 3  # the resumed run's three new shards only


def test_release_freed_memory_is_harmless(monkeypatch: pytest.MonkeyPatch) -> None:
    heap._glibc_malloc_trim.cache_clear()
    assert (heap._glibc_malloc_trim() is not None) == (platform.libc_ver()[0] == "glibc")
    assert heap.release_freed_memory() in (True, False)
    assert heap.release_freed_memory() in (
        True,
        False,
    )  # twice in a row: nothing left, no error

    def not_glibc(name: str) -> str:
        raise ValueError(f"unrecognized configuration name {name!r}")

    heap._glibc_malloc_trim.cache_clear()
    monkeypatch.setattr(os, "confstr", not_glibc, raising=False)
    try:
        assert heap._glibc_malloc_trim() is None
        assert heap.release_freed_memory() is False  # another C library: a silent no-op
    finally:
        monkeypatch.undo()
        heap._glibc_malloc_trim.cache_clear()
