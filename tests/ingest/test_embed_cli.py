"""``qrag-embed``: a .txt / .jsonl corpus embedded in shards, resumed, refused when changed or
malformed (one line, exit code 2), and written to an embedded Qdrant."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from qdrant_client import QdrantClient

from qrag_integrations import QRAGRetriever, load_model
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.ingest.cli import CorpusFormatError, main, read_rows
from qrag_integrations.ingest.sharded import read_shards
from qrag_integrations.stores.qdrant import QdrantSource

REPO = Path(__file__).resolve().parents[2]
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
TEXTS = [
    " ".join(WORDS[(5 * i + j) % len(WORDS)] for j in range(3 + i % 5)) + f" {i}."
    for i in range(11)
]


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    return load_model(str(tiny_bert_dir))


@pytest.fixture(autouse=True)
def keep_threads() -> Iterator[None]:
    """``--threads`` sets torch's process-wide thread count: put it back after each test."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def args(corpus: Path, ckpt: Path, *extra: str) -> list[str]:
    """``qrag-embed`` arguments: the cache next to the corpus, small shards, one thread."""
    return [
        str(corpus),
        "--cache",
        str(corpus.parent / "cache"),
        "--checkpoint",
        str(ckpt),
        "--shard-rows",
        "4",
        "--batch-size",
        "3",
        "--threads",
        "1",
        *extra,
    ]


def run(capsys: pytest.CaptureFixture[str], corpus: Path, ckpt: Path, *extra: str) -> list[dict]:
    """``qrag-embed`` in-process; its JSON lines."""
    main(args(corpus, ckpt, *extra))
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``qrag-embed`` expecting exit code 2; its error line (the last of stderr, after any
    model-loading progress bar)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("qrag-embed: error: ")
    assert [line for line in lines if "error" in line] == lines[-1:]
    return lines[-1]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_txt_corpus_is_embedded_in_shards_and_a_rerun_resumes(
    tmp_path: Path, model: QRAGModel, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "my notes.txt"
    corpus.write_text(
        "\n".join(TEXTS[:5]) + "\n\n   \n" + "\r\n".join(TEXTS[5:]) + "\n", encoding="utf-8"
    )
    [first] = run(capsys, corpus, tiny_bert_dir)
    assert (first["rows"], first["shards"], first["embedded_now"]) == (11, 3, 11)
    folder = Path(first["folder"])
    assert folder.parent == tmp_path / "cache" and folder.name.startswith("my-notes-")
    shards = list(read_shards(folder, model))
    assert [i for s in shards for i in s.ids] == [str(i) for i in range(11)]  # blank lines skipped
    torch.testing.assert_close(
        torch.cat([s.embeddings for s in shards]), model.embed_chunks(TEXTS), rtol=1e-5, atol=1e-6
    )
    [again] = run(capsys, corpus, tiny_bert_dir)
    assert (again["folder"], again["rows"], again["embedded_now"]) == (first["folder"], 11, 0)


def test_a_changed_corpus_is_refused_with_exit_code_2(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    run(capsys, corpus, tiny_bert_dir)
    corpus.write_text(
        "\n".join(TEXTS[:5] + ["someone else's line."] + TEXTS[6:]) + "\n", encoding="utf-8"
    )
    err = refused(capsys, args(corpus, tiny_bert_dir))
    assert r"corpus differs from the one cached" in err and "corpus rows 4-7" in err
    err = refused(capsys, args(corpus, tiny_bert_dir, "--shard-rows", "5"))
    assert "shard_rows=4" in err


def test_threads_below_one_are_refused(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    err = refused(capsys, args(corpus, tiny_bert_dir, "--threads", "0"))
    assert "--threads: must be an integer >= 1, got '0'" in err


def test_jsonl_corpus_goes_to_an_embedded_qdrant_and_a_rerun_writes_nothing(
    tmp_path: Path, model: QRAGModel, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = ["d0"] * 6 + ["d1"] * 3 + ["d0"] * 2  # d0 continues after d1, across shards
    corpus = write_jsonl(
        tmp_path / "facts.jsonl",
        [{"text": t, "id": f"c{i}", "doc_id": d} for i, (t, d) in enumerate(zip(TEXTS, docs))],
    )
    qdrant = str(tmp_path / "qdrant")
    embedded, stored = run(
        capsys, corpus, tiny_bert_dir, "--qdrant-path", qdrant, "--collection", "kb"
    )
    assert embedded["embedded_now"] == 11 and embedded["shards"] == 3
    assert (stored["collection"], stored["written_now"], stored["points"]) == ("kb", 11, 11)
    embedded, stored = run(
        capsys, corpus, tiny_bert_dir, "--qdrant-path", qdrant, "--collection", "kb"
    )
    assert (embedded["embedded_now"], stored["written_now"], stored["points"]) == (0, 0, 11)

    client = QdrantClient(path=qdrant)
    try:
        source = QdrantSource(client, "kb", model, create=False)
        chunks = source.get([f"c{i}" for i in range(11)])
        assert [c.text for c in chunks] == TEXTS
        assert [(c.doc_id, c.order) for c in chunks] == [("d0", i) for i in range(6)] + [
            ("d1", i) for i in range(3)
        ] + [("d0", 6), ("d0", 7)]
        retriever = QRAGRetriever.from_store(
            client, collection_name="kb", model=model, k=2, candidates_per_step=11
        )
        found = retriever.invoke("where did mary go")
        assert len(found) == 2 and {d.page_content for d in found} <= set(TEXTS)
    finally:
        client.close()


def test_jsonl_defaults_and_a_collection_of_another_encoder(
    tmp_path: Path,
    tiny_bert_dir: Path,
    tiny_bert_dir_48: Path,
    model: QRAGModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    corpus = write_jsonl(tmp_path / "plain.jsonl", [{"text": t} for t in TEXTS[:6]])
    qdrant = str(tmp_path / "qdrant")
    _, stored = run(capsys, corpus, tiny_bert_dir, "--qdrant-path", qdrant)
    assert (stored["collection"], stored["written_now"]) == ("plain", 6)
    client = QdrantClient(path=qdrant)
    try:
        chunks = QdrantSource(client, "plain", model, create=False).get([str(i) for i in range(6)])
        assert [(c.id, c.doc_id, c.order) for c in chunks] == [
            (str(i), "plain", i) for i in range(6)
        ]
        err = refused(
            capsys, args(corpus, tiny_bert_dir, "--qdrant-path", qdrant)
        )  # held by this client
        assert f"Qdrant at {qdrant}: " in err and "already accessed" in err
    finally:
        client.close()
    err = refused(capsys, args(corpus, tiny_bert_dir_48, "--qdrant-path", qdrant))
    assert "Qdrant collection 'plain'" in err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('["text"]', 'line 3: expected a JSON object with a string "text"'),
        ('{"text": 7}', 'line 3: expected a JSON object with a string "text"'),
        ('{"text": "a", ', "line 3: not valid JSON"),
        ('{"text": "  "}', 'line 3: "text" is empty'),
        ('{"text": "a", "id": [1]}', 'line 3: "id" must be a non-empty string or an integer'),
    ],
)
def test_a_bad_jsonl_line_is_named(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text(f'{{"text": "one"}}\n\n{line}\n{{"text": "two"}}\n', encoding="utf-8")
    err = refused(capsys, args(corpus, tiny_bert_dir))
    assert f"{corpus} {message}" in err


def test_rows_are_read_lazily(tmp_path: Path) -> None:
    corpus = tmp_path / "late.jsonl"
    corpus.write_text('{"text": "one", "id": 5}\n{"text": "two"}\nnot json\n', encoding="utf-8")
    rows = read_rows(corpus, "doc")
    assert [next(rows).id, next(rows).id] == ["5", "1"]  # read before the bad line is reached
    with pytest.raises(CorpusFormatError, match="line 3"):
        next(rows)


def test_bad_arguments_exit_with_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = ["--cache", str(tmp_path / "cache")]
    assert "does not exist" in refused(capsys, [str(tmp_path / "missing.txt"), *cache])
    (tmp_path / "c.csv").write_text("a\n")
    assert "unknown corpus suffix '.csv'" in refused(capsys, [str(tmp_path / "c.csv"), *cache])
    (tmp_path / "c.txt").write_text("a\n")
    assert "--collection needs --qdrant-path or --qdrant-url" in refused(
        capsys, [str(tmp_path / "c.txt"), *cache, "--collection", "kb"]
    )
    assert "is not a file" in refused(capsys, [str(tmp_path), *cache])
    with pytest.raises(
        SystemExit
    ) as exit_info:  # argparse's own refusals (usage and one error line)
        main([str(tmp_path / "c.txt"), *cache, "--shard-rows", "0"])
    assert exit_info.value.code == 2 and "must be >= 1" in capsys.readouterr().err
    assert not list((tmp_path / "cache").glob("*"))


def test_the_command_is_registered() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    assert scripts["qrag-embed"] == "qrag_integrations.ingest.cli:main"


def test_a_bf16_stream_gets_its_own_folder_and_settings(
    tmp_path: Path, model: QRAGModel, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    [fp32] = run(capsys, corpus, tiny_bert_dir)
    [bf16] = run(capsys, corpus, tiny_bert_dir, "--quantize", "bf16")
    assert (fp32["backend"], fp32["quantize"]) == ("torch", None)
    assert (bf16["backend"], bf16["quantize"]) == ("torch", "bf16")
    assert bf16["folder"] == fp32["folder"] + "-torch-bf16" and bf16["embedded_now"] == 11
    manifest = json.loads((Path(bf16["folder"]) / "stream.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["inference_backend"] == "torch-bf16"
    assert (
        "inference_backend"
        not in json.loads((Path(fp32["folder"]) / "stream.json").read_text(encoding="utf-8"))[
            "settings"
        ]
    )
    bf16_model = load_model(str(tiny_bert_dir))
    bf16_model.set_backend("torch", "bf16")
    shards = list(read_shards(bf16["folder"], bf16_model))
    assert sum(len(s.ids) for s in shards) == 11
    with pytest.raises(QRAGError, match="another chunk encoder or settings"):
        list(read_shards(bf16["folder"], model))  # read as float32: refused, not mixed


def test_a_quantization_the_backend_does_not_offer_is_refused(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    err = refused(capsys, args(corpus, tiny_bert_dir, "--backend", "onnx", "--quantize", "bf16"))
    assert "quantize with backend='onnx' must be one of" in err
    assert not (tmp_path / "cache").exists()
