"""Tests for the MuSiQue, 2WikiMultiHopQA and custom JSONL loaders, and the registry."""

import json
from pathlib import Path

import pytest
from qrag_training.data import (
    DATASET_NAMES,
    CustomFormatError,
    load_custom_jsonl,
    load_dataset,
    load_musique,
    load_twowiki,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MUSIQUE = FIXTURES / "musique_sample.jsonl"
TWOWIKI = FIXTURES / "twowiki_sample.json"
CUSTOM = FIXTURES / "custom_sample.jsonl"


def test_musique_fixture():
    episodes = load_musique(MUSIQUE)
    assert [e.id for e in episodes] == ["2hop__1001_2002", "3hop1__3003_4004_5005"]
    first, second = episodes
    assert first.support == [0, 2] and first.answer == "Velmora"
    assert first.chunks[2] == (
        "Lantern Sonata: The Lantern Sonata is a piano sonata written by Orin Tallis in 1850."
    )
    assert second.titles == ["Brindle Tower", "Ostravia", "Sarn", "Pelgrin Bridge"]  # idx order
    assert second.support == [0, 1, 2]
    assert len(load_musique(MUSIQUE, include_unanswerable=True)) == 3
    assert len(load_musique(MUSIQUE, limit=1)) == 1
    for ep in episodes:
        ep.validate()


def test_twowiki_fixture():
    episodes = load_twowiki(TWOWIKI)
    assert [e.support for e in episodes] == [[0, 2], [0, 1], [0, 1, 2, 3]]
    first = episodes[0]
    assert first.chunks[0] == (
        "Paper Harbor: Paper Harbor is a 1987 drama film. It was shot in a fishing village."
    )
    assert first.meta["type"] == "comparison" and first.meta["evidences"]
    for ep in episodes:
        ep.validate()


def test_custom_fixture():
    c1, c2, c3 = load_custom_jsonl(CUSTOM, chunk_size=60, splitter="sentences")
    assert (c1.id, c1.support, c1.answer, c1.titles) == ("c1", [1], "red", None)
    assert c2.id == "2"
    assert c2.chunks == [
        "Oakridge is a village on a hill.",
        "Its flour is ground at the Stone Mill.",
        "The village holds a fair every spring.",
        "The Stone Mill stands by the river.",
        "It was built by Hal Brenner in 1790. It still turns today.",  # packed: 58 chars
    ]
    assert c2.support == [1, 4]
    assert c2.titles == ["Oakridge"] * 3 + ["Stone Mill"] * 2
    assert c2.meta["chunk_doc_ids"] == ["village"] * 3 + ["mill"] * 2
    assert c3.support == [] and c3.answer is None
    big = load_custom_jsonl(CUSTOM, chunk_size=500, splitter="sentences")[1]
    assert len(big.chunks) == 2 and big.support == [0, 1]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"question": "q", "chunks": ["a"]', "invalid JSON"),
        ('{"chunks": ["a"], "support": [0]}', "question"),
        ('{"question": "q", "chunks": ["a", "b"], "support": [2]}', "out of range"),
        ('{"question": "q", "chunks": ["a", "b"], "support": [1, 1]}', "duplicate"),
        ('{"question": "q", "chunks": ["a"], "suport": [0]}', "unknown keys"),
        ('{"question": "q"}', "exactly one of"),
        ('{"question": "q", "chunks": []}', "non-empty list"),
        ('{"question": "q", "chunks": ["a"], "support_text": ["zebra"]}', "in no chunk"),
        ('{"question": "q", "documents": [{"id": "d"}]}', "'text'"),
        ('["q", "a"]', "JSON object"),
        ('{"id": "c1", "question": "q", "chunks": ["a"]}', "already used on line 1"),
    ],
)
def test_malformed_custom_lines_name_the_line(tmp_path, bad_line, message):
    path = tmp_path / "corpus.jsonl"
    good = json.dumps({"id": "c1", "question": "q", "chunks": ["a"], "support": [0]})
    path.write_text(f"{good}\n\n{bad_line}\n", encoding="utf-8")
    with pytest.raises(CustomFormatError, match=message) as info:
        load_custom_jsonl(path, splitter="sentences")
    assert f"{path}:3:" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_registry_dispatch():
    assert set(DATASET_NAMES) == {
        "babilong",
        "ruler",
        "hotpotqa",
        "musique",
        "twowiki",
        "custom",
        "mixture",
    }
    assert len(load_dataset("custom", path=CUSTOM, splitter="sentences")) == 3
    assert len(load_dataset("MuSiQue", path=MUSIQUE)) == 2
    assert len(load_dataset("twowiki", path=TWOWIKI)) == 3
    assert len(load_dataset("babilong", task="qa1", n=2, target_tokens=500, seed=0)) == 2
    assert len(load_dataset("ruler", variant="niah_single", n=2, target_tokens=500, seed=0)) == 2
    assert len(load_dataset("hotpotqa", split="eval", limit=3)) == 3
    with pytest.raises(ValueError, match="babilong, ruler, hotpotqa, musique, twowiki, custom"):
        load_dataset("squad")
