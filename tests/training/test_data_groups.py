"""Held out by document: custom-JSONL lines that share a document stay on one side of the split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qrag_training.data.custom import load_custom_jsonl
from qrag_training.data.episode import Episode
from qrag_training.data.groups import SPLIT_KEY, assign_split_keys
from qrag_training.evaluate import compose_config
from qrag_training.settings import load_episodes, run_config_from


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _articles(n_articles: int = 40, questions: int = 3) -> list[dict]:
    """SQuAD-like lines: several questions per article, ``chunks`` = the article's paragraphs."""
    records = []
    for a in range(n_articles):
        paragraphs = [f"Article {a} paragraph {p} says fact {a}-{p}." for p in range(4)]
        for q in range(questions):
            records.append(
                {"id": f"a{a}q{q}", "question": f"What is fact {a}-{q}?", "chunks": paragraphs}
            )
            records[-1]["support"] = [q]
    return records


def test_lines_sharing_a_document_share_a_key(tmp_path: Path) -> None:
    def line(i: str, doc_ids: list[str]) -> dict:
        docs = [{"id": d, "text": f"Text of {d}."} for d in doc_ids]
        return {"id": i, "question": f"q {i}?", "documents": docs, "support": [0]}

    path = _write(
        tmp_path / "docs.jsonl",
        [line("1", ["A", "B"]), line("2", ["B", "C"]), line("3", ["C"]), line("4", ["D"])],
    )
    keys = [e.meta[SPLIT_KEY] for e in load_custom_jsonl(path, splitter="sentences")]
    assert keys[0] == keys[1] == keys[2] == "doc:A"  # A-B, B-C, C: one component
    assert keys[3] == "doc:D"
    by_line = load_custom_jsonl(path, splitter="sentences", group_by="line")
    assert [e.meta[SPLIT_KEY] for e in by_line] == ["1", "2", "3", "4"]


def test_documents_without_ids_are_known_by_their_text() -> None:
    same = [Episode("1", "q?", ["x"], [0]), Episode("2", "q?", ["x"], [0])]
    other = Episode("3", "q?", ["y"], [0])
    assign_split_keys([*same, other])
    assert same[0].meta[SPLIT_KEY] == same[1].meta[SPLIT_KEY] != other.meta[SPLIT_KEY]


def test_group_by_a_meta_field_and_its_errors() -> None:
    eps = [Episode(str(i), "q?", [f"c{i}"], [0], meta={"article": i // 2}) for i in range(4)]
    assign_split_keys(eps, "meta.article")
    assert [e.meta[SPLIT_KEY] for e in eps] == ["meta:0", "meta:0", "meta:1", "meta:1"]
    with pytest.raises(ValueError, match="has no meta field 'title'"):
        assign_split_keys(eps, "meta.title")
    with pytest.raises(ValueError, match=r"group_by must be 'auto', 'line' or 'meta.<field>'"):
        assign_split_keys(eps, "doc")


@pytest.mark.parametrize(("group_by", "leaks"), [("auto", False), ("line", True)])
def test_no_article_on_both_sides_of_the_split(tmp_path: Path, group_by: str, leaks: bool) -> None:
    path = _write(tmp_path / "squad_like.jsonl", _articles())
    cfg = compose_config("custom", [f"env.path={path}", f"env.group_by={group_by}"])
    run = run_config_from(cfg)
    train, held_out = load_episodes(cfg, run, "train"), load_episodes(cfg, run, "eval")
    assert train and held_out
    train_chunks = {c for e in train for c in e.chunks}
    shared = [e.id for e in held_out if train_chunks & set(e.chunks)]
    assert bool(shared) is leaks
    if not leaks:  # every question of an article is on the article's side
        assert {e.id[: e.id.index("q")] for e in train}.isdisjoint(
            {e.id[: e.id.index("q")] for e in held_out}
        )
