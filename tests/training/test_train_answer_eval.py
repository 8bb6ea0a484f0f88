"""Answer evaluation: chunk selection, prompts, batched reader calls and errors, qrag-eval --reader."""

from __future__ import annotations

import json
import re

import pytest
from qrag_training.answering import (
    ChunkSelection,
    answer_episodes,
    generate_answers,
    ordered,
    reader_options,
)
from qrag_training.data.episode import Episode
from qrag_training.evaluate import main
from qrag_training.metrics import Retrieval
from scripted_readers import (
    WRONG,
    ScriptedReader,
    context_of,
    gold_fact_reader,
    install_factory,
    write_unlabeled,
)

from qrag_integrations.llm import DEFAULT_TEMPLATE, ReaderError


def test_chunk_selection_modes() -> None:
    picked, q = [4, 1, 7, 2], [0.9, 0.2, 0.6, 0.7]
    assert ChunkSelection.parse("all").choose(picked, q) == [4, 1, 7, 2]
    assert ChunkSelection.parse("first:2").choose(picked, q) == [4, 1]
    assert ChunkSelection.parse("first:0").choose(picked, q) == []
    assert ChunkSelection.parse("q>=0.6").choose(picked, q) == [4, 7, 2]  # retrieval order kept
    assert ChunkSelection.parse("q >= -1e3").choose(picked, q) == picked
    assert [str(ChunkSelection.parse(t)) for t in ("all", "first:3", "q>=0.5")] == [
        "all",
        "first:3",
        "q>=0.5",
    ]
    for bad in ("top:2", "first:-1", "q>0.5", "first"):
        with pytest.raises(ValueError, match="all, first:N or q>=T"):
            ChunkSelection.parse(bad)
    assert ordered([7, 2, 4], "document") == [2, 4, 7] and ordered([7, 2, 4], "retrieval") == [
        7,
        2,
        4,
    ]


def test_reader_options_read_json_values_else_strings() -> None:
    got = reader_options(
        ["max_new_tokens=8", "device=cuda:1", 'stop=["\\n"]', "url=http://h/v1?a=b"]
    )
    assert got == {
        "max_new_tokens": 8,
        "device": "cuda:1",
        "stop": ["\n"],
        "url": "http://h/v1?a=b",
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        reader_options(["verbose"])


def test_answers_are_batched_and_prompts_follow_retrieval_order() -> None:
    chunks = ["mary went to the kitchen.", "the cat is blue.", "john got the apple."]
    episodes = [Episode(str(i), f"q{i}?", chunks, [0], answer="kitchen") for i in range(5)]
    results = [Retrieval([2, 0, 1], [0.3, 0.9, 0.1]) for _ in episodes]
    reader = ScriptedReader(lambda p: context_of(p).splitlines()[0])
    chosen, answers = answer_episodes(
        reader, episodes, results, ChunkSelection.parse("q>=0.2"), DEFAULT_TEMPLATE, batch_size=2
    )
    assert chosen == [[2, 0]] * 5 and answers == ["john got the apple."] * 5
    assert [len(b) for b in reader.batches] == [2, 2, 1]
    chosen, answers = answer_episodes(
        reader, episodes[:1], results[:1], ChunkSelection(), DEFAULT_TEMPLATE, "document"
    )
    assert chosen == [[0, 1, 2]] and answers == ["mary went to the kitchen."]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda batch: 1 / 0, "reader scripted failed on a batch of 2 prompts: ZeroDivisionError"),
        (lambda batch: ["one"], "reader scripted returned 1 answers for 2 prompts"),
        (lambda batch: [None, "x"], "returned a NoneType instead of a string"),
    ],
)
def test_reader_errors_are_named(answer, message) -> None:
    class Broken:
        name = "scripted"

        def generate(self, prompts):
            return answer(prompts)

    with pytest.raises(ReaderError, match=message):
        generate_answers(Broken(), ["a", "b"])


def eval_args(out, *extra):
    return [
        "--env",
        "babilong",
        "--set",
        "env.task=qa1",
        "--set",
        "env.eval_target_tokens=200",
        "--n",
        "6",
        "--steps",
        "2",
        "--threads",
        "1",
        "--out",
        str(out),
        *extra,
    ]


def held_out_qa1():
    from qrag_training.evaluate import compose_config
    from qrag_training.settings import load_episodes, run_config_from

    cfg = compose_config(
        "babilong", ["env.task=qa1", "env.eval_target_tokens=200", "eval_episodes=6"]
    )
    return load_episodes(cfg, run_config_from(cfg), "eval")


def rows(out):
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def test_cli_answers_from_bm25_chunks(tmp_path, monkeypatch) -> None:
    episodes = held_out_qa1()
    reader = gold_fact_reader(episodes)
    calls = install_factory(monkeypatch, reader)
    out = tmp_path / "bm25"
    main(
        eval_args(
            out,
            "--baseline",
            "bm25",
            "--reader",
            "local",
            "--reader-option",
            "max_new_tokens=8",
            "--reader-option",
            "device=cpu",
            "--reader-batch",
            "4",
        )
    )
    assert calls == [("local", {"max_new_tokens": 8, "device": "cpu"})]
    assert [len(b) for b in reader.batches] == [4, 2]  # 6 episodes, 4 prompts per call
    summary = json.loads((out / "summary.json").read_text())
    samples = rows(out)
    expected = [float(set(r["support"]) <= set(r["reader_chunks"])) for r in samples]
    assert 0 < sum(expected) and [r["answer_em"] for r in samples] == expected
    assert summary["answer_em"] == pytest.approx(sum(expected) / 6) == summary["answer_f1"]
    assert (
        summary["n_answers"] == 6
        and summary["reader"] == "gold-fact"
        and summary["answer_chunks"] == "all"
    )
    assert all(r["reader_chunks"] == r["picked"] for r in samples)  # retrieval order, every pick
    assert [r["gold_answer"] for r in samples] == [e.answer for e in episodes]
    assert all(p.startswith(DEFAULT_TEMPLATE.split("\n")[0]) for p in reader.prompts)


def refused(capsys, message: str, call) -> None:
    """``call`` ends qrag-eval with exit status 2 and ``message`` on one stderr line."""
    with pytest.raises(SystemExit) as info:
        call()
    assert info.value.code == 2
    assert re.search(message, capsys.readouterr().err.strip().splitlines()[-1])


def test_cli_no_retrieval_baseline_gives_the_question_only(tmp_path, monkeypatch, capsys) -> None:
    reader = gold_fact_reader(held_out_qa1())
    install_factory(monkeypatch, reader)
    out = tmp_path / "none"
    summary = main_summary(out, "--baseline", "none", "--reader", "local")
    assert (
        summary["answer_em"] == 0.0
        and summary["mean_steps"] == 0.0
        and summary["retriever"] == "none"
    )
    assert all(context_of(p) == "" for p in reader.prompts) and len(reader.prompts) == 6
    assert all(r["picked"] == [] and r["answer"] == WRONG for r in rows(out))
    refused(
        capsys,
        "--baseline none retrieves nothing: it needs --reader",
        lambda: main(eval_args(tmp_path / "x", "--baseline", "none")),
    )


def main_summary(out, *extra):
    main(eval_args(out, *extra))
    return json.loads((out / "summary.json").read_text())


def test_cli_chunk_selection_by_q_value_and_first_n(
    tmp_path, monkeypatch, tiny_bert_dir, capsys
) -> None:
    install_factory(monkeypatch, gold_fact_reader(held_out_qa1()))
    base = ("--baseline", "base", "--base-model", str(tiny_bert_dir), "--reader", "local")
    main_summary(tmp_path / "all", *base)
    q_values = [q for r in rows(tmp_path / "all") for q in r["q_values"]]
    threshold = sorted(q_values)[len(q_values) // 2]
    summary = main_summary(tmp_path / "q", *base, "--answer-chunks", f"q>={threshold!r}")
    for r in rows(tmp_path / "q"):
        assert r["reader_chunks"] == [
            p for p, q in zip(r["picked"], r["q_values"]) if q >= threshold
        ]
    assert 0 < summary["mean_reader_chunks"] < 2
    main_summary(tmp_path / "first", *base, "--answer-chunks", "first:1")
    assert all(r["reader_chunks"] == r["picked"][:1] for r in rows(tmp_path / "first"))
    refused(
        capsys,
        "q>=0.5 needs Q-values; --baseline dense has none",
        lambda: main(
            eval_args(
                tmp_path / "d",
                "--baseline",
                "dense",
                "--base-model",
                str(tiny_bert_dir),
                "--reader",
                "local",
                "--answer-chunks",
                "q>=0.5",
            )
        ),
    )


def test_cli_reader_failure_is_reported(tmp_path, monkeypatch) -> None:
    def fail(prompt: str) -> str:
        raise ConnectionError("server at http://localhost:9 refused the connection")

    install_factory(monkeypatch, ScriptedReader(fail, name="openai:http://localhost:9#m"))
    with pytest.raises(
        SystemExit,
        match=r"qrag-eval: the reader failed: reader openai:http://localhost:9#m "
        r"failed on a batch of 6 prompts: ConnectionError",
    ):
        main(
            eval_args(
                tmp_path / "e", "--baseline", "bm25", "--reader", "openai:http://localhost:9#m"
            )
        )


def test_cli_answers_on_a_corpus_without_support(tmp_path, monkeypatch, capsys) -> None:
    from qrag_training.data.custom import load_custom_jsonl

    facts = write_unlabeled(tmp_path / "corpus.jsonl")
    install_factory(
        monkeypatch, gold_fact_reader(load_custom_jsonl(tmp_path / "corpus.jsonl"), facts)
    )
    args = [
        "--jsonl",
        str(tmp_path / "corpus.jsonl"),
        "--set",
        "env.splitter=sentences",
        "--baseline",
        "bm25",
        "--steps",
        "2",
        "--threads",
        "1",
    ]
    main([*args, "--reader", "local", "--out", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (
        summary["n_fact"] == 0
        and summary["n_answers"] == summary["n"] > 0
        and summary["answer_em"] > 0
    )
    refused(
        capsys, "none of the .* questions of .* has supporting facts", lambda: main(args)
    )  # fact metrics need labels
