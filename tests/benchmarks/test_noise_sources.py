"""The unseen noise sources read the texts they name and nothing a training run reads."""

from __future__ import annotations

import json

import pytest
from qrag_training.data.hotpotqa import default_path
from qrag_training.data.splits import EVAL, split_of

from benchmarks.general import run as bench_general
from benchmarks.harness import noise_sources


def test_wiki_noise_holds_no_sentence_of_a_training_or_validation_paragraph() -> None:
    records = json.loads(default_path().read_text(encoding="utf-8"))
    read_by_training = {
        s.strip()
        for r in records
        if split_of(str(r["_id"])) != EVAL
        for _, sentences in r["context"]
        for s in sentences
    }
    pool = noise_sources.wiki_noise()
    assert pool.kind == "wiki"
    # 1M tokens at 25 a sentence, without repeating the pool
    assert len(pool) >= 40_000
    assert not read_by_training & set(pool.sentences)
    assert all(5 <= len(s.split()) <= 60 for s in pool.sentences)


def test_every_unseen_source_is_a_babilong_cell(dictionaries) -> None:
    for name, source in noise_sources.UNSEEN_NOISE.items():
        pool = set(source().sentences)
        (episode,) = bench_general.cell_episodes(f"babilong-{name}-500", "val", 1, 3)[:1]
        story = set(episode.meta["story_positions"])
        noise = [c for i, c in enumerate(episode.chunks) if i not in story]
        assert noise and all(c in pool for c in noise), name


def test_dictd_paragraphs_keep_the_body_prose_without_markup(tmp_path):
    import gzip

    from benchmarks.harness.dictd import dictd_paragraphs

    text = (
        "00-database-info\n   This file is licensed under the GFDL.\n\n"
        "abstract machine\n\n   <theory> A {processor} design which is not\n"
        "   intended to be built.  See {Reynolds paper (http://example.org/x.html)}.\n\n"
        "      code example, indented deeper\n\n   (1994-11-08)\n\n"
        "blurgle\n /bler'gl/, n.\n\n   1. [UK] Spoken {metasyntactic variable}.\n"
    )
    path = tmp_path / "tiny.dict.dz"
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    assert dictd_paragraphs(path) == [
        "A processor design which is not intended to be built. See Reynolds paper.",
        "(1994-11-08)",
        "Spoken metasyntactic variable.",
    ]
    path.write_bytes(gzip.compress(b"no body at all\n"))
    with pytest.raises(ValueError, match="not a dictd dictionary"):
        dictd_paragraphs(path)


def test_a_missing_dictionary_names_the_package(monkeypatch, tmp_path):
    from benchmarks.harness import dictd

    monkeypatch.setattr(dictd, "DICTD_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="dict-foldoc"):
        dictd.dictd_path("foldoc")


@pytest.fixture
def dictionaries(monkeypatch, tmp_path):
    """Tiny foldoc and jargon dictionaries in place of Debian's (where they are installed the
    real ones hold 40,360 sentences: benchmarks/babilong/results/babilong_val_555580_stories.md)."""
    import gzip

    from benchmarks.harness import dictd

    bodies = {
        "foldoc": [
            "A compiler translates a program written in one language into another language.",
            "Mary wrote the first one in the kitchen.",  # bAbI words: never noise
            "The stack grows downwards on most machines.",
        ],
        "jargon": [
            "A hack is an appropriate application of ingenuity to a problem.",
            "The stack grows downwards on most machines.",  # a repeat: kept once
        ],
    }
    for name, sentences in bodies.items():
        text = "".join(f"entry {i}\n\n   {s}\n\n" for i, s in enumerate(sentences))
        (tmp_path / f"{name}.dict.dz").write_bytes(gzip.compress(text.encode("utf-8")))
    monkeypatch.setattr(dictd, "DICTD_DIR", tmp_path)


def test_foldoc_noise_reads_both_dictionaries_once_without_babi_words(dictionaries):
    pool = noise_sources.foldoc_noise()
    assert pool.kind == "foldoc"
    assert pool.sentences == (
        "A compiler translates a program written in one language into another language.",
        "The stack grows downwards on most machines.",
        "A hack is an appropriate application of ingenuity to a problem.",
    )
    control = noise_sources.UNSEEN_NOISE["foldoc_babi"]()
    assert control.kind == "foldoc_babi"
    assert control.sentences[1] == "Mary wrote the first one in the kitchen."
    assert len(control) == 4
