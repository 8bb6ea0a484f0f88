"""SQuAD v2 dev as out-of-domain validation: articles 0-17 only, the rest never parsed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from qrag_training.data import squad
from qrag_training.data.squad import VALIDATION_ARTICLES, load_squad_ood, read_articles


def _article(i: int) -> dict:
    return {
        "title": f"Topic_{i}",
        "paragraphs": [
            {
                "context": f"Paragraph one of topic {i}.",
                "qas": [
                    {
                        "question": f"What is one of {i}?",
                        "id": f"{i}a",
                        "answers": [{"text": "one", "answer_start": 0}],
                        "is_impossible": False,
                    },
                    {
                        "question": f"Unanswerable {i}?",
                        "id": f"{i}b",
                        "answers": [],
                        "is_impossible": True,
                    },
                ],
            },
            {
                "context": f"Paragraph two of topic {i}.",
                "qas": [
                    {
                        "question": f"What is two of {i}?",
                        "id": f"{i}c",
                        "answers": [{"text": "two", "answer_start": 0}],
                        "is_impossible": False,
                    }
                ],
            },
        ],
    }


@pytest.fixture
def squad_file(tmp_path: Path) -> Path:
    """Three readable articles, then bytes that are not JSON: reading must stop before them."""
    head = json.dumps({"version": "v2.0", "data": [_article(i) for i in range(3)]})
    path = tmp_path / "squad.json"
    path.write_text(head[:-2] + ", {this is not json and must never be parsed}]}", encoding="utf-8")
    return path


def test_only_the_asked_articles_are_decoded(squad_file: Path) -> None:
    assert [a["title"] for a in read_articles(3, squad_file)] == ["Topic_0", "Topic_1", "Topic_2"]
    with pytest.raises(json.JSONDecodeError):
        read_articles(
            4, squad_file
        )  # the fixture's 4th "article" is garbage: proof it was not read before


@pytest.mark.parametrize("count", [0, VALIDATION_ARTICLES + 1, 35])
def test_reserved_articles_are_refused(count: int, squad_file: Path) -> None:
    with pytest.raises(ValueError, match="reserved"):
        read_articles(count, squad_file)


def test_pooled_single_hop_episodes(squad_file: Path) -> None:
    episodes = load_squad_ood(articles=(0, 3), group_size=2, path=squad_file)
    assert len(episodes) == 6  # two answerable questions per article; unanswerable skipped
    first = episodes[0]
    assert (
        len(first.chunks) == 4
        and first.chunks[first.support[0]] == "Topic 0: Paragraph one of topic 0."
    )
    assert first.answer == "one" and first.meta["group"] == 0
    assert len(episodes[-1].chunks) == 2  # the last group holds article 2 alone
    sample = load_squad_ood(articles=(0, 3), group_size=2, path=squad_file, n=3, seed=1)
    assert len(sample) == 3 and {e.id for e in sample} <= {e.id for e in episodes}
    with pytest.raises(ValueError, match="reserved"):
        load_squad_ood(articles=(10, 19), path=squad_file)


def test_the_installed_file_gives_validation_articles_only() -> None:
    titles = [a["title"] for a in read_articles(VALIDATION_ARTICLES)]
    assert len(titles) == 18 and titles[0] == "Normans" and titles[-1] == "Civil_disobedience"


def test_not_one_byte_past_the_asked_articles_is_read(
    squad_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reserved articles are never read, not even as bytes: reading stops at the closing
    brace of the last asked article."""
    read: list[bytes] = []
    real = os.read

    def spy(fd: int, n: int) -> bytes:
        read.append(real(fd, n))
        return read[-1]

    monkeypatch.setattr(squad.os, "read", spy)
    assert len(read_articles(3, squad_file)) == 3
    got = b"".join(read)
    assert got.endswith(b"}") and b"this is not json" not in got
    assert squad_file.read_bytes().startswith(got)
    assert squad_file.read_bytes()[len(got) :].startswith(b", {this is not json")
