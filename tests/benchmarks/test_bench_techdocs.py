"""The techdocs cell: its question file, the installed paragraphs it names, and a tiny run."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from benchmarks.general import run as bench_general
from benchmarks.general import techdocs

FIELDS = {"package", "version", "paragraph_sha", "question", "split"}
#: The question file's lines whose package is installed at the version they were written for: a
#: later ``bash .ci/setup`` may resolve newer releases, whose reworded paragraphs are not this
#: suite's failure (the cell drops or refuses their questions, naming them).
WRITTEN = [
    q for q in techdocs.read_questions() if techdocs.installed_version(q["package"]) == q["version"]
]


@pytest.fixture(scope="module")
def written_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("techdocs") / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in WRITTEN), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def only_written_versions(written_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test reads the questions of packages at their written versions (all of them, on
    the versions ``.ci/setup`` installs today)."""
    monkeypatch.setattr(techdocs, "QUESTIONS", written_file)


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    return WRITTEN


@pytest.fixture(scope="module")
def corpus() -> dict[str, techdocs.Document]:
    """The pool's paragraphs by SHA-256."""
    return {techdocs.paragraph_sha(d.text): d for d in techdocs.read_corpus()}


def test_every_line_has_the_fields_and_its_package_split(questions: list[dict]) -> None:
    assert len(questions) >= 200
    for q in questions:
        assert set(q) == FIELDS, q
        assert re.fullmatch(r"[0-9a-f]{64}", q["paragraph_sha"]), q
        assert q["question"].strip() and q["version"].strip(), q
        assert q["package"] in techdocs.PACKAGES, q
        assert q["split"] == techdocs.split_of_package(q["package"]), q


def test_the_splits_share_no_package_and_hold_about_half_each(questions: list[dict]) -> None:
    by_split = {s: [q for q in questions if q["split"] == s] for s in techdocs.SPLITS}
    packages = {s: {q["package"] for q in qs} for s, qs in by_split.items()}
    assert not packages["val"] & packages["test"]
    assert all(0.4 <= len(qs) / len(questions) <= 0.6 for qs in by_split.values())


def test_every_question_names_an_installed_paragraph_in_its_own_words(
    questions: list[dict], corpus: dict[str, techdocs.Document]
) -> None:
    """Guards the file: each question's paragraph is in its package at the version written for,
    named where not. A question repeats fewer than 7 consecutive words of its answer."""
    missing = [
        f"{q['package']} {q['version']}" for q in questions if q["paragraph_sha"] not in corpus
    ]
    assert not missing, f"paragraphs no longer in the installed packages: {sorted(set(missing))}"
    for q in questions:
        answer = (
            " " + " ".join(re.findall(r"[\w']+", corpus[q["paragraph_sha"]].text.lower())) + " "
        )
        words = re.findall(r"[\w']+", q["question"].lower())
        runs = (" " + " ".join(words[i : i + 7]) + " " for i in range(len(words) - 6))
        assert not any(run in answer for run in runs), q["question"]


def test_each_episode_holds_exactly_one_supporting_paragraph(questions: list[dict]) -> None:
    episodes = bench_general.cell_episodes("techdocs", "val", None, 0)
    asked = [q for q in questions if q["split"] == "val"]
    assert len(episodes) == len(asked)
    for e, q in zip(episodes, asked):
        e.validate()
        assert len(e.support) == 1 and e.question == q["question"]
        paragraph = e.chunks[e.support[0]].split(": ", 1)[1]
        assert techdocs.paragraph_sha(paragraph) == q["paragraph_sha"]
    sample = bench_general.cell_episodes("techdocs", "val", 5, 0)
    assert [e.id for e in sample] == [
        e.id for e in bench_general.cell_episodes("techdocs", "val", 5, 0)
    ]
    assert len(sample) == 5 and {e.id for e in sample} <= {e.id for e in episodes}


#: A description with a badge, a code fence, an indented literal block and a changelog section.
DESCRIPTION = """Title
=====

[![CI](https://example.org/badge.svg)](https://example.org)

This library does one useful thing, and it explains at some length, in plain words,
why a reader might want to use it for their own project today.

```python
x = compute(1, 2)

print(x)
```

    indented = literal_block(of, rest, code, that, should, never, count, as_prose)

Usage
~~~~~

Changelog
---------

1.0.0
~~~~~

Fixed a bug where the library crashed on empty input, which several users reported.

Contributing
------------

Contributions are welcome: open an issue first and describe the change you would like.
"""


def test_prose_paragraphs_drop_code_markup_and_changelogs() -> None:
    assert techdocs.prose_paragraphs(DESCRIPTION) == [
        (
            "This library does one useful thing, and it explains at some length, in plain words, "
            "why a reader might want to use it for their own project today."
        ),
        "Contributions are welcome: open an issue first and describe the change you would like.",
    ]


def _with_missing(tmp_path: Path, questions: list[dict], share: float) -> Path:
    """The val questions with the first ``share`` of them pointing at no paragraph."""
    val = [dict(q) for q in questions if q["split"] == "val"]
    for q in val[: int(share * len(val))]:
        q["paragraph_sha"] = "0" * 64
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in val), encoding="utf-8")
    return path


def test_a_few_lost_paragraphs_are_dropped_with_a_warning(
    tmp_path: Path, questions: list[dict]
) -> None:
    path = _with_missing(tmp_path, questions, 0.05)
    with pytest.warns(UserWarning, match=r"\d+ of \d+ techdocs questions ask for a paragraph"):
        episodes = techdocs.load_techdocs("val", path=path)
    val = sum(q["split"] == "val" for q in questions)
    assert len(episodes) == val - int(0.05 * val)


def test_many_lost_paragraphs_refuse_and_name_the_versions(
    tmp_path: Path, questions: list[dict]
) -> None:
    path = _with_missing(tmp_path, questions, 0.2)
    first = next(q for q in questions if q["split"] == "val")
    with pytest.raises(ValueError, match=r"bash \.ci/setup") as raised:
        techdocs.load_techdocs("val", path=path)
    assert f"{first['package']} {first['version']} (installed: " in str(raised.value)


def test_the_committed_file_loads_without_drops_and_only_known_splits() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(techdocs.load_techdocs("test", n=3)) == 3
    with pytest.raises(ValueError, match="unknown techdocs split"):
        techdocs.load_techdocs("eval")


def test_tiny_run_of_the_techdocs_cell(tiny_bert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "techdocs.json"
    result = bench_general.main(
        [
            "--base",
            str(tiny_bert_dir),
            "--model",
            f"w1={tiny_bert_dir}:question_weight=1",
            "--cells",
            "techdocs",
            "--techdocs-n",
            "4",
            "--threads",
            "1",
            "--no-plot",
            "--out",
            str(out),
        ]
    )
    cell = json.loads(out.read_text())["cells"][0]
    assert cell == json.loads(json.dumps(result["cells"][0]))
    assert cell["cell"] == "techdocs" and cell["n"] == 4
    assert set(cell["metrics"]) == {"untrained", "w1", "dense", "bm25", "dense+bm25"}
    assert set(cell["metrics"]["bm25"]) == {"hit@1", "hit@3"}
    assert len(cell["per_question"]["dense"]["hit@3"]) == 4
    assert cell["paired_vs_dense"]["w1"]["hit@1"]["verdict"] in ("better", "worse", "tie")
