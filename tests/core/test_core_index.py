"""ChunkIndex: document order, ids, deletes, persistence, metadata filters."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from saved_folders import drop_digests

from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.index import ChunkIndex

D = 8


def emb(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, D, generator=torch.Generator().manual_seed(seed))


def check_rows(index: ChunkIndex, given: dict[str, torch.Tensor]) -> None:
    """Row i of the embeddings is the embedding that was added with chunk i."""
    snap = index.snapshot()
    assert snap.embeddings.shape == (len(snap.chunks), D)
    for row, chunk in enumerate(snap.chunks):
        assert torch.equal(snap.embeddings[row], given[chunk.id].to(snap.embeddings.dtype)), (
            row,
            chunk.id,
        )


def build_two_docs() -> tuple[ChunkIndex, dict[str, torch.Tensor]]:
    index = ChunkIndex(D)
    given: dict[str, torch.Tensor] = {}
    e1, e2, e3, e4 = emb(2, 1), emb(1, 2), emb(2, 3), emb(1, 4)
    index.add(["a0", "a1"], e1, ids=["a0", "a1"], doc_ids=["A", "A"])
    index.add(["b0"], e2, ids=["b0"], doc_ids=["B"])
    index.add(["a2", "b1"], e3, ids=["a2", "b1"], doc_ids=["A", "B"])
    index.add(["c0"], e4, ids=["c0"], doc_ids=["C"])
    for ids, e in ((["a0", "a1"], e1), (["b0"], e2), (["a2", "b1"], e3), (["c0"], e4)):
        given.update({i: e[j] for j, i in enumerate(ids)})
    return index, given


def test_add_keeps_document_order_across_calls() -> None:
    index, given = build_two_docs()
    assert index.ids == ["a0", "a1", "a2", "b0", "b1", "c0"]
    assert [c.order for c in index.snapshot().chunks] == [0, 1, 2, 0, 1, 0]
    assert [c.doc_id for c in index.snapshot().chunks] == ["A", "A", "A", "B", "B", "C"]
    check_rows(index, given)
    assert len(index) == 6 and "a2" in index and "zz" not in index


def test_explicit_orders_sort_into_place() -> None:
    index = ChunkIndex(D)
    e = emb(3, 5)
    index.add(["s2", "s0", "s1"], e, ids=["s2", "s0", "s1"], doc_ids=["D"] * 3, orders=[2, 0, 1])
    late = emb(1, 6)
    index.add(["s1.5"], late, ids=["mid"], doc_ids=["D"], orders=[1])  # ties: by chunk id
    index.add(["s-1"], emb(1, 7), ids=["first"], doc_ids=["D"], orders=[-1])
    assert index.ids == ["first", "s0", "mid", "s1", "s2"]
    assert torch.equal(index.snapshot().embeddings[1], e[1])
    assert torch.equal(index.snapshot().embeddings[2], late[0])


def test_default_ids_and_docs() -> None:
    index = ChunkIndex(D)
    ids1 = index.add(["x", "y"], emb(2, 1))
    ids2 = index.add(["z"], emb(1, 2))
    assert len(set(ids1 + ids2)) == 3 and all(len(i) == 32 for i in ids1 + ids2)
    chunks = index.snapshot().chunks
    by_id = {c.id: c for c in chunks}
    assert by_id[ids1[0]].doc_id == by_id[ids1[1]].doc_id != by_id[ids2[0]].doc_id  # one per call
    assert sorted(c.order for c in chunks) == [0, 0, 1]
    assert set(index.ids) == set(ids1 + ids2)
    assert index.add(["n"], emb(1, 3), ids=[7]) == ["7"]  # ids become strings


def test_duplicate_ids_rejected_and_index_unchanged() -> None:
    index, given = build_two_docs()
    before = index.snapshot()
    with pytest.raises(QRAGError, match="unique"):
        index.add(["p", "q"], emb(2, 9), ids=["p", "p"])
    with pytest.raises(QRAGError, match=r"already in the index: \['b0'\]"):
        index.add(["p", "q"], emb(2, 9), ids=["p", "b0"])
    assert index.snapshot() is before
    check_rows(index, given)


def test_add_argument_errors() -> None:
    index = ChunkIndex(D)
    with pytest.raises(IndexMismatchError, match=r"\(2, 8\)"):
        index.add(["a", "b"], torch.zeros(2, D + 1))
    with pytest.raises(IndexMismatchError):
        index.add(["a", "b"], torch.zeros(3, D))
    with pytest.raises(QRAGError, match="metadatas has 1 entries for 2 texts"):
        index.add(["a", "b"], torch.zeros(2, D), metadatas=[{}])
    with pytest.raises(QRAGError, match="doc_ids has 1 entries"):
        index.add(["a", "b"], torch.zeros(2, D), doc_ids=["d"])
    with pytest.raises(QRAGError, match="orders has 3 entries"):
        index.add(["a", "b"], torch.zeros(2, D), orders=[0, 1, 2])
    assert len(index) == 0
    with pytest.raises(QRAGError, match="dtype"):
        ChunkIndex(D, dtype=torch.int8)


def test_delete_keeps_rows_aligned() -> None:
    index, given = build_two_docs()
    assert index.delete(["a1", "b1", "nope"]) == 2
    assert index.ids == ["a0", "a2", "b0", "c0"]
    check_rows(index, given)
    assert index.get(["a2", "a1", "c0"])[0].text == "a2"
    assert [c.id for c in index.get(["a2", "a1", "c0"])] == ["a2", "c0"]
    assert "a1" not in index
    assert index.delete(["a1", "unknown"]) == 0
    assert index.delete([]) == 0
    # a deleted id can come back, and the row lookup follows the new layout
    again = emb(1, 42)
    index.add(["a1 again"], again, ids=["a1"], doc_ids=["A"], orders=[1])
    given["a1"] = again[0]
    assert index.ids == ["a0", "a1", "a2", "b0", "c0"]
    check_rows(index, given)
    assert index.delete(index.ids) == 5
    assert len(index) == 0 and index.snapshot().embeddings.shape == (0, D)


def test_snapshots_are_immutable_views() -> None:
    index, _ = build_two_docs()
    snap = index.snapshot()
    rows = snap.embeddings.clone()
    index.delete(["a0"])
    index.add(["new"], emb(1, 8), doc_ids=["A"])
    assert len(snap) == 6 and torch.equal(snap.embeddings, rows)
    assert len(index.snapshot()) == 6 and index.snapshot() is not snap


META = [
    {
        "lang": "en",
        "title": "naïve café ☃ 中文 🙂",
        "n": 1,
        "tags": ["x", "ü"],
        "nested": {"a": [1, 2.5, None, True]},
    },
    {"lang": "de", "title": "Grüße", "n": 2},
    {},
    {"lang": "fr", "title": "\u202e rtl \u200b", "n": 3, "score": -0.125},
]


def build_meta_index(dtype: torch.dtype = torch.float32) -> tuple[ChunkIndex, torch.Tensor]:
    index = ChunkIndex(D, dtype=dtype)
    e = emb(4, 11) * 1000  # large values make fp16 rounding visible
    index.add(
        ["t0 é", "t1\nline", 't2 "quoted"', "t3 🙂"],
        e,
        metadatas=META,
        ids=["i0", "i1", "i2", "i3"],
        doc_ids=["d0", "d0", "d1", "d1"],
    )
    return index, e


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_save_load_round_trip(tmp_path: Path, dtype: torch.dtype) -> None:
    index, _ = build_meta_index(dtype)
    index.save(tmp_path / "idx", extra={"model": "tiny"})
    loaded = ChunkIndex.load(tmp_path / "idx", expected_dim=D)
    assert loaded.dtype == dtype and loaded.embedding_dim == D
    assert loaded.snapshot().chunks == index.snapshot().chunks
    assert loaded.ids == ["i0", "i1", "i2", "i3"]
    a, b = index.snapshot().embeddings, loaded.snapshot().embeddings
    assert a.dtype == b.dtype == dtype
    assert torch.equal(
        a.view(torch.int16) if dtype != torch.float32 else a.view(torch.int32),
        b.view(torch.int16) if dtype != torch.float32 else b.view(torch.int32),
    )  # bit-exact
    manifest = ChunkIndex.read_manifest(tmp_path / "idx")
    assert manifest["size"] == 4 and manifest["model"] == "tiny" and manifest["embedding_dim"] == D
    # a new chunk of d0 (the first document) sorts before d1's chunks
    loaded.add(["t-late"], emb(1, 12), ids=["late"], doc_ids=["d0"])
    assert loaded.ids == ["i0", "i1", "late", "i2", "i3"]


def test_save_load_empty_index(tmp_path: Path) -> None:
    ChunkIndex(D).save(tmp_path / "e")
    loaded = ChunkIndex.load(tmp_path / "e")
    assert len(loaded) == 0 and loaded.snapshot().embeddings.shape == (0, D)


def test_load_dimension_mismatch(tmp_path: Path) -> None:
    index, _ = build_meta_index()
    index.save(tmp_path / "idx")
    with pytest.raises(IndexMismatchError, match="8-dimensional .* 32-dimensional"):
        ChunkIndex.load(tmp_path / "idx", expected_dim=32)


@pytest.mark.parametrize("name", ["index.json", "embeddings.safetensors", "records.jsonl"])
def test_load_missing_file(tmp_path: Path, name: str) -> None:
    index, _ = build_meta_index()
    index.save(tmp_path / "idx")
    (tmp_path / "idx" / name).unlink()
    with pytest.raises(QRAGError, match=name.replace(".", r"\.")):
        ChunkIndex.load(tmp_path / "idx")


@pytest.mark.parametrize(
    "name,content",
    [
        pytest.param("index.json", b"{broken", id="manifest-json"),
        pytest.param("index.json", b'{"format": "something-else"}', id="manifest-format"),
        pytest.param(
            "index.json", b'{"format": "qrag-index", "format_version": 1}', id="manifest-no-dim"
        ),
        pytest.param(
            "embeddings.safetensors", b"\x00\x01not safetensors" * 8, id="embeddings-garbage"
        ),
        pytest.param("records.jsonl", b'{"id": "i0"\n', id="records-json"),
        pytest.param("records.jsonl", b"\xff\xfe\xfa not utf-8\n", id="records-not-utf8"),
        pytest.param("records.jsonl", b'{"text": "no id"}\n' * 4, id="records-missing-keys"),
        pytest.param("records.jsonl", b"[1, 2]\n" * 4, id="records-not-objects"),
    ],
)
def test_load_corrupt_file(tmp_path: Path, name: str, content: bytes) -> None:
    index, _ = build_meta_index()
    index.save(tmp_path / "idx")
    (tmp_path / "idx" / name).write_bytes(content)
    with pytest.raises(QRAGError, match=name.replace(".", r"\.")):
        ChunkIndex.load(tmp_path / "idx")


def test_load_size_disagreement(tmp_path: Path) -> None:
    index, _ = build_meta_index()
    index.save(tmp_path / "idx")
    drop_digests(tmp_path / "idx" / "index.json")  # the check behind the digests
    lines = (tmp_path / "idx" / "records.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "idx" / "records.jsonl").write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    with pytest.raises(QRAGError, match="do not agree"):
        ChunkIndex.load(tmp_path / "idx")


def test_unserialisable_metadata_writes_nothing(tmp_path: Path) -> None:
    index = ChunkIndex(D)
    index.add(["x"], emb(1, 1), metadatas=[{"obj": object()}])
    with pytest.raises(QRAGError, match="JSON-serialisable"):
        index.save(tmp_path / "idx")
    assert list(tmp_path.iterdir()) == []
    # an existing saved index at the target stays as it was
    good, _ = build_meta_index()
    good.save(tmp_path / "idx")
    before = {p.name: p.read_bytes() for p in (tmp_path / "idx").iterdir()}
    index.add(["y"], emb(1, 2), metadatas=[{"s": {1, 2}}])
    with pytest.raises(QRAGError):
        index.save(tmp_path / "idx")
    assert {p.name: p.read_bytes() for p in (tmp_path / "idx").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".idx.lock",
        "idx",
    ]  # the lock of the first save


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda: {"obj": object()}, id="object"),
        pytest.param(lambda: {"t": torch.zeros(2)}, id="tensor"),
        pytest.param(lambda: (lambda d: d.update(me=d) or d)({}), id="circular"),  # noqa: PLC3002 (a dict holding itself)
    ],
)
def test_unserialisable_metadata_kinds(tmp_path: Path, bad) -> None:
    index = ChunkIndex(D)
    index.add(["x"], emb(1, 1), metadatas=[bad()])
    with pytest.raises(QRAGError, match="JSON-serialisable"):
        index.save(tmp_path / "idx")
    assert list(tmp_path.iterdir()) == []


def test_records_are_utf8_json_lines(tmp_path: Path) -> None:
    index, _ = build_meta_index()
    index.save(tmp_path / "idx")
    raw = (tmp_path / "idx" / "records.jsonl").read_text(encoding="utf-8")
    lines = raw.splitlines()
    assert len(lines) == 4 and raw.endswith("\n")
    assert json.loads(lines[0])["metadata"]["title"] == "naïve café ☃ 中文 🙂"
    assert "☃" in raw  # not \u-escaped


def test_metadata_filters() -> None:
    index, _ = build_meta_index()  # rows in document order: i0 (en), i1 (de), i2 ({}), i3 (fr)
    snap = index.snapshot()
    assert snap.rows_matching(None) is None
    eq = snap.rows_matching({"lang": "en"})
    assert eq.dtype == np.int64 and eq.tolist() == [0]
    assert snap.rows_matching({"lang": ["fr", "en"]}).tolist() == [0, 3]  # any of, ascending
    assert snap.rows_matching({"lang": ("de",)}).tolist() == [1]
    assert snap.rows_matching({"lang": "en", "n": 2}).tolist() == []  # all keys must match
    assert snap.rows_matching({"lang": "de", "n": 2}).tolist() == [1]
    assert snap.rows_matching({"missing": None}).tolist() == []  # absent key never matches
    assert snap.rows_matching({}).tolist() == [0, 1, 2, 3]
    assert snap.rows_matching(lambda m: m.get("n", 0) >= 2).tolist() == [1, 3]
    assert snap.rows_matching(lambda m: False).tolist() == []
    with pytest.raises(QRAGError, match="mapping or a callable"):
        snap.rows_matching(5)  # type: ignore[arg-type]


def test_metadata_is_copied_on_add() -> None:
    meta = {"k": "v"}
    index = ChunkIndex(D)
    index.add(["x"], emb(1, 1), metadatas=[meta])
    meta["k"] = "changed"
    assert index.snapshot().chunks[0].metadata == {"k": "v"}


def test_nbytes() -> None:
    index, _ = build_meta_index(torch.float16)
    assert index.nbytes() == 4 * D * 2 + 16 * 4


@pytest.mark.parametrize("seed", range(5))
def test_document_order_does_not_depend_on_arrival(seed: int) -> None:
    """Documents sit in natural order of their ids ("d2" before "d10"), chunks by order, however
    the documents (and the calls) arrive."""
    docs = {f"d{i}": [f"d{i}-{j}" for j in range(1 + i % 3)] for i in (1, 2, 10, 3)}
    calls = [(d, ids) for d, ids in docs.items()]
    random.Random(seed).shuffle(calls)
    index = ChunkIndex(D)
    for d, ids in calls:
        index.add(ids, emb(len(ids), int(d[1:])), ids=ids, doc_ids=[d] * len(ids))
    assert index.ids == [i for d in ("d1", "d2", "d3", "d10") for i in docs[d]]


def test_add_with_replace_swaps_chunks_with_known_ids() -> None:
    index, given = build_two_docs()
    with pytest.raises(QRAGError, match="already in the index"):
        index.add(["b0 again"], emb(1, 9), ids=["b0"], doc_ids=["B"])
    again = emb(1, 9)
    index.add(["b0 again"], again, ids=["b0"], doc_ids=["B"], replace=True)
    assert len(index) == 6 and index.get(["b0"])[0].text == "b0 again"
    given["b0"] = again[0]
    check_rows(index, given)
