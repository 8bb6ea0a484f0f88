"""Training lines from raw documents (qrag_training.questions, qrag-make-questions): every line
loads with the trainer's custom loader unchanged, its support holds its answer, no line mixes the
trainer's sides, questions are unique, and a reader LLM's bad questions never reach the file."""

from __future__ import annotations

import json
import random
import re
import sys
import types
from pathlib import Path

import pytest
from openai_stub import Reply, StubServer
from qrag_training.data.custom import load_custom_jsonl
from qrag_training.data.groups import SPLIT_KEY
from qrag_training.data.splits import split_of
from qrag_training.make_questions import main as make_questions_main
from qrag_training.questions import (
    QuestionGenerationError,
    QuestionSettings,
    call_loader,
    make_questions,
    read_path,
    write_lines,
)
from qrag_training.questions.reader_questions import BRIDGE_PROMPT
from qrag_training.questions.sources import as_source_documents
from qrag_training.questions.spans import answer_spans, contains_phrase, normalise
from question_corpus import documents
from scripted_readers import ScriptedReader

from qrag_integrations.llm import build_reader

SETTINGS = QuestionSettings(chunk_size=160, pool_chunks=8, splitter="sentences")


def load(path: Path, settings: QuestionSettings = SETTINGS) -> list:
    return load_custom_jsonl(path, settings.chunk_size, settings.chunk_overlap, settings.splitter)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], object]:
    lines, report = make_questions(documents(40), SETTINGS)
    path = tmp_path_factory.mktemp("gen") / "lines.jsonl"
    write_lines(path, lines)
    return path, lines, report


def test_every_line_loads_and_its_support_holds_its_answer(generated) -> None:
    path, lines, report = generated
    episodes = load(path)
    assert len(episodes) == len(lines) == report.lines
    kinds = {line["meta"]["kind"] for line in lines}
    assert kinds == {"single", "topic", "bridge"}
    for line, e in zip(lines, episodes):
        assert len(e.support) == len(line["support_text"]) >= 1
        assert len(e.chunks) >= min(SETTINGS.pool_chunks, 2)
        if "answer" in line:
            mark = normalise(line["support_text"][-1])  # the loader sorts support indices
            (answer_chunk,) = [e.chunks[i] for i in e.support if mark in normalise(e.chunks[i])]
            assert contains_phrase(answer_chunk, line["answer"])
            assert not contains_phrase(line["question"], line["answer"])
        assert line["question"].endswith("?")


def test_bridge_lines_need_both_chunks(generated) -> None:
    path, lines, _ = generated
    episodes = load(path)
    bridges = [(x, e) for x, e in zip(lines, episodes) if x["meta"]["kind"] == "bridge"]
    assert len(bridges) >= 5
    for line, e in bridges:
        first, second = (
            next(e.chunks[i] for i in e.support if normalise(t) in normalise(e.chunks[i]))
            for t in line["support_text"]
        )
        names = {normalise(s.text) for s in answer_spans(line["support_text"][1], set())}
        linking = [n for n in names if contains_phrase(first, n) and contains_phrase(second, n)]
        assert linking, line  # a name both chunks share ...
        assert not any(contains_phrase(line["question"], n) for n in linking)  # ... never asked


def test_no_line_crosses_the_split_and_each_document_keeps_its_side(generated) -> None:
    path, lines, report = generated
    episodes = load(path)  # group_by=auto: the trainer's grouping
    sides_of_doc: dict[str, set[str]] = {}
    for line, e in zip(lines, episodes):
        side = split_of(e.meta[SPLIT_KEY])  # the side the trainer will put the line on
        assert side == line["meta"]["side"]
        for d in line["documents"]:
            assert split_of(f"doc:{d['id']}") == side
            sides_of_doc.setdefault(d["id"], set()).add(side)
    assert all(len(s) == 1 for s in sides_of_doc.values())
    assert {line["meta"]["side"] for line in lines} >= {"train", "eval"}
    assert sum(v for k, v in report.written.items() if k.endswith("/eval")) > 0


def test_questions_are_unique_and_the_same_seed_gives_the_same_file(generated) -> None:
    _, lines, _ = generated
    questions = [normalise(x["question"]) for x in lines]
    assert len(set(questions)) == len(questions)
    again, _ = make_questions(documents(40) + documents(40)[:5], SETTINGS)  # 5 repeated texts
    assert again == lines


def test_split_none_keeps_every_document_on_one_side() -> None:
    lines, report = make_questions(documents(12), QuestionSettings(split="none", pool_chunks=8))
    assert {x["meta"]["side"] for x in lines} == {"all"}
    assert set(report.written) <= {"single/all", "topic/all", "bridge/all"}


def test_a_large_document_becomes_an_excerpt_around_the_question() -> None:
    text = " ".join(
        f"Section {i} names the keeper Harlan Vost{i} of the lighthouse at Penmoor{i}."
        for i in range(60)
    )
    settings = QuestionSettings(chunk_size=120, pool_chunks=6, splitter="sentences", split="none")
    lines, _ = make_questions([{"id": "big", "title": "Keepers", "text": text}], settings)
    for line in lines:
        (doc,) = line["documents"]
        assert doc["id"] == "big" and len(doc["text"]) < len(text)
        assert all(normalise(s) in normalise(doc["text"]) for s in line["support_text"])


def scripted_question(prompt: str) -> str:
    """A valid question (words of the passage, not the answer) or, for answers starting with a
    digit, one that names its answer (the checks must refuse it)."""
    answer = re.search(r'whose answer is "([^"]+)"', prompt).group(1)
    if answer[0].isdigit():
        return f"Is the number {answer} right"
    passage = prompt.split("Passage 2:\n" if "Passage 2:" in prompt else "Passage:\n", 1)[1]
    first = prompt.split("Passage 1:\n", 1)[1] if "Passage 1:" in prompt else ""
    words = [w for w in re.findall(r"[a-z]{4,}", (first + " " + passage).lower())]
    name = re.search(r'refer to "([^"]+)"', prompt)
    banned = normalise(answer) + " " + (normalise(name.group(1)) if name else "")
    words = [w for w in words if w not in banned]
    return f"Question: which {' '.join(words[:3])} {' '.join(words[-3:])}"


def test_a_reader_writes_the_questions_and_bad_ones_fall_back_to_the_rules() -> None:
    reader = ScriptedReader(scripted_question, name="scripted")
    settings = QuestionSettings(chunk_size=160, pool_chunks=8, splitter="sentences", reader_batch=7)
    lines, report = make_questions(documents(40), settings, reader)
    writers = {x["meta"]["writer"] for x in lines}
    assert writers == {"scripted", "rules"}
    assert all(len(b) <= 7 for b in reader.batches)
    assert report.dropped["reader: answer in the question"] > 0
    assert not any(x["meta"]["kind"] == "topic" for x in lines)  # the reader writes answers
    assert any(x["meta"]["kind"] == "bridge" and x["meta"]["writer"] == "scripted" for x in lines)
    assert any(BRIDGE_PROMPT.split("{", 1)[0] in p for p in reader.prompts)
    for x in lines:
        if x["meta"]["writer"] == "scripted":
            assert x["question"].startswith("Which ") and "Question:" not in x["question"]

    strict = QuestionSettings(**{**settings.__dict__, "rules_fallback": False})
    lines, _ = make_questions(documents(40), strict, ScriptedReader(scripted_question))
    assert {x["meta"]["writer"] for x in lines} == {"scripted"}
    assert not any(x["answer"][0].isdigit() for x in lines)


def test_an_openai_compatible_server_writes_questions() -> None:
    def respond(index: int, body: dict) -> Reply:
        return Reply(content=scripted_question(body["messages"][-1]["content"]) + "\nmore text")

    with StubServer(respond) as server:
        reader = build_reader(f"openai:{server.url}#stub-model")
        lines, _ = make_questions(documents(10), SETTINGS, reader)
        assert len(server.requests) > 0
    assert any(x["meta"]["writer"] == reader.name for x in lines)
    assert all("more text" not in x["question"] for x in lines)


def test_a_random_tiny_llm_writes_nothing_that_passes(tmp_path: Path) -> None:
    from tiny_llm import build_tiny_llama

    reader = build_reader(f"local:{build_tiny_llama(tmp_path / 'm')}", max_new_tokens=6)
    strict = QuestionSettings(
        chunk_size=160, pool_chunks=8, splitter="sentences", rules_fallback=False
    )
    with pytest.raises(QuestionGenerationError, match="no question passed the checks"):
        make_questions(documents(3), strict, reader)


def test_framework_documents_and_loader_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument

    lc = LCDocument(page_content="Harlan Vost kept the light.", id="lc-1", metadata={"title": "T"})
    li = LIDocument(text="Penmoor has 40 boats.", id_="li-1", metadata={"file_name": "p.txt"})
    docs = as_source_documents([lc, li, "plain text", {"text": "x", "id": 7}])
    assert [(d.id, d.title) for d in docs][:2] == [("lc-1", "T"), ("li-1", "p.txt")]
    assert docs[2].id.startswith("sha1:") and docs[3].id == "7"
    with pytest.raises(QuestionGenerationError, match="document 0 is a int"):
        as_source_documents([3])

    module = types.ModuleType("my_loaders")
    module.load = lambda: [lc]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "my_loaders", module)
    assert call_loader("my_loaders:load")[0].id == "lc-1"
    with pytest.raises(QuestionGenerationError, match="has no function 'nope'"):
        call_loader("my_loaders:nope")


def test_folders_and_jsonl_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.md").write_text("# Harbour notes\n\nPenmoor has 40 boats.", encoding="utf-8")
    (tmp_path / "sub" / "b.txt").write_text("Harlan Vost kept the light.", encoding="utf-8")
    (tmp_path / "c.jsonl").write_text('{"body": "Some text.", "id": "c1"}\n', encoding="utf-8")
    (tmp_path / "skip.bin").write_bytes(b"\0")
    with pytest.raises(QuestionGenerationError, match="pass --text-key"):
        read_path(tmp_path)
    docs = read_path(tmp_path, text_key="body")
    assert [(d.id, d.title) for d in docs] == [
        ("a.md", "Harbour notes"),
        ("sub/b.txt", "b"),
        ("c1", None),
    ]
    with pytest.raises(QuestionGenerationError, match="no such file or folder"):
        read_path(tmp_path / "missing")


def test_clashing_ids_and_bad_settings_are_refused() -> None:
    with pytest.raises(QuestionGenerationError, match="two different documents have the id 'x'"):
        make_questions([{"id": "x", "text": "One."}, {"id": "x", "text": "Two."}])
    with pytest.raises(QuestionGenerationError, match="bridge_share must lie in"):
        QuestionSettings(bridge_share=2)


def test_the_command_writes_a_loadable_file_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in documents(20)), encoding="utf-8")
    out = tmp_path / "lines.jsonl"
    args = [str(corpus), "--out", str(out), "--chunk-size", "160", "--splitter", "sentences"]
    make_questions_main([*args, "--pool-chunks", "8"])
    printed = capsys.readouterr().out
    assert "loaded back by the trainer's loader" in printed and "env.chunk_size=160" in printed
    assert len(load(out)) == len(out.read_text().splitlines())
    before = out.read_bytes()
    with pytest.raises(SystemExit) as info:
        make_questions_main(args)
    assert info.value.code == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert out.read_bytes() == before


def test_the_command_names_a_missing_input_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        make_questions_main([str(tmp_path / "nope"), "--out", str(tmp_path / "x.jsonl")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("qrag-make-questions: error: ") and "nope" in err[-1]
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize(
    ("sentence", "answer", "question"),
    [
        ("In 1066, William invaded England.", "1066", "In what year, William invaded England?"),
        ("The town has 12 water mills.", "12", "The town has how many water mills?"),
        (
            "Rollo gave his name to the Normandy coast.",
            "Normandy",
            "Rollo gave his name to what coast?",
        ),
        (
            (
                "Lavoisier observed that there was no overall increase in weight when tin and air "
                "were heated in a closed container, said the chronicle of the famous academy."
            ),
            "Lavoisier",
            "What observed that there was no overall increase in weight when tin?",
        ),
    ],
)
def test_rules_turn_a_sentence_into_a_wh_question(
    sentence: str, answer: str, question: str
) -> None:
    from qrag_training.questions.rules import single_question

    (span,) = [s for s in answer_spans(sentence, set()) if s.text == answer]
    assert single_question(sentence, span) == question


def write_folder(folder: Path, files: int, seed: int = 0) -> Path:
    """``files`` text files about made-up towns, each naming the next as its twin (bridges); most
    a few sentences, every seventh about 15 chunks long."""
    rng = random.Random(seed)
    folder.mkdir()
    syllables = ["ka", "lo", "mer", "dun", "ves", "tor", "bri", "sal", "wen", "fal", "gor", "lin"]

    def town(i: int) -> str:
        parts = [syllables[(i // 12**k) % 12] for k in range(4)]
        return "".join(parts).capitalize() + "ford"

    for i in range(files):
        paragraphs = [
            (
                f"{town(i)} lies on the river. It was founded in {rng.randint(1100, 1900)} by "
                f"Oren Kask. About {rng.randint(200, 9000)} people live there."
            ),
            f"Its twin town is {town(i + 1)}, {rng.randint(3, 90)} miles upstream.",
        ]
        if i % 7 == 0:
            paragraphs += [
                f"In {rng.randint(1100, 1900)} the council of {town(i)} built "
                f"{rng.randint(2, 40)} mills, and the harbour master wrote the count down in the "
                "ledger kept at the old hall by the river, next to the market square."
                for _ in range(40)
            ]
        (folder / f"doc_{i:05d}.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "files", [1, 3, 150, pytest.param(5000, marks=pytest.mark.slow, id="5000-slow")]
)
def test_the_command_works_with_its_defaults_on_folders_of_any_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: int
) -> None:
    folder = write_folder(tmp_path / "my_docs", files)
    out = tmp_path / "lines.jsonl"
    make_questions_main([str(folder), "--out", str(out)])  # a refusal would exit 2
    assert "loaded back by the trainer's loader" in capsys.readouterr().out
    assert out.read_text(encoding="utf-8").count("\n") >= 1


def test_sources_longer_than_the_pool_need_no_more_documents() -> None:
    """A bridge between two long documents already fills ``pool_chunks``: no top-up (this asked
    ``random.sample`` for a negative count)."""
    long_docs = [
        {
            "id": f"d{d}",
            "text": "\n\n".join(
                f"Harlan Vost{d} counted {n + 3} boats at Penmoor{d} in {1800 + n}. "
                f"Its twin town is Penmoor{1 - d}."
                for n in range(12)
            ),
        }
        for d in range(2)
    ]
    settings = QuestionSettings(chunk_size=120, pool_chunks=4, splitter="sentences", split="none")
    lines, _ = make_questions([*long_docs, *documents(6)], settings)
    assert lines
