"""Splits that fit the corpus (qrag_training.data.splits.plan_splits), the errors a corpus that
cannot train gets, and the start summary that says how a run's data was split."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from qrag_training.console import RunPlan, expected_updates, start_summary
from qrag_training.data.custom import CustomFormatError
from qrag_training.data.splits import (
    EVAL,
    FITTED,
    HASH,
    MIN_SLICE,
    TRAIN,
    VAL,
    plan_splits,
    split_of,
)
from qrag_training.evaluate import compose_config
from qrag_training.settings import corpus_split, load_episodes, run_config_from
from tiny_corpus import write_corpus

from qrag_integrations.core.errors import QRAGError


def custom_cfg(path: Path, *overrides: str):
    """``env=custom`` choosing on the validation slice and reporting on the held-out one."""
    return compose_config(
        "custom",
        [
            f"env.path={path}",
            "env.splitter=sentences",
            "env.eval_hash_split=val",
            "env.report_hash_split=eval",
            *overrides,
        ],
    )


# -- the plan ---------------------------------------------------------------------------------
def test_a_large_corpus_keeps_the_stable_hash_split() -> None:
    keys = [f"doc:{i}" for i in range(3000)]
    plan = plan_splits(keys)
    assert plan.method == HASH
    assert all(plan.split(k) == split_of(k) for k in keys)
    assert min(plan.hash_sizes[VAL], plan.hash_sizes[EVAL]) >= MIN_SLICE


def test_900_questions_on_6_documents_get_a_validation_and_a_report_document() -> None:
    keys = [f"doc:{d}" for d in range(6) for _ in range(150)]
    assert Counter(split_of(k) for k in set(keys))[VAL] == 0  # the stable split: no validation
    plan = plan_splits(keys)
    assert plan.method == FITTED
    groups = Counter(plan.split(k) for k in set(keys))
    assert groups == {TRAIN: 4, VAL: 1, EVAL: 1}
    assert plan_splits(list(reversed(keys))).fitted == plan.fitted  # order of lines: no matter


@pytest.mark.parametrize("seed", range(40))
def test_every_small_corpus_gets_three_sides_by_group(seed: int) -> None:
    """Random corpora of 3-60 groups of 1-200 questions: each side has a group, the report side
    aims at a fifth of the questions, and it does not depend on whether validation is used."""
    rng = random.Random(seed)
    keys = [f"g{seed}-{g}" for g in range(rng.randint(3, 60)) for _ in range(rng.randint(1, 200))]
    plan = plan_splits(keys)
    if plan.method == HASH:
        return
    groups = Counter(plan.split(k) for k in set(keys))
    assert groups[TRAIN] >= 1 and groups[VAL] >= 1 and groups[EVAL] >= 1
    questions = Counter(plan.split(k) for k in keys)
    largest = max(Counter(keys).values())
    assert questions[EVAL] <= len(keys) / 5 + largest  # near its share, give or take a group
    without_val = plan_splits(keys, with_val=False)
    assert {k for k in set(keys) if without_val.split(k) == EVAL} == {
        k for k in set(keys) if plan.split(k) == EVAL
    }
    assert VAL not in {without_val.split(k) for k in keys}


def test_fewer_than_three_groups_cannot_be_split_by_group() -> None:
    with pytest.raises(ValueError, match="2 group"):
        plan_splits(["a"] * 50 + ["b"] * 50)


# -- the sides a run loads ----------------------------------------------------------------------
def test_a_small_corpus_trains_validates_and_reports_on_disjoint_documents(tmp_path: Path):
    cfg = custom_cfg(write_corpus(tmp_path / "c.jsonl", documents=6, per_document=150))
    run = run_config_from(cfg)
    train = load_episodes(cfg, run, "train")
    val = load_episodes(cfg, run, "eval", limit=10_000)
    report = load_episodes(cfg, run, "eval", hash_split=EVAL, limit=10_000)
    assert (len(train), len(val), len(report)) == (600, 150, 150)
    documents = [{tuple(e.chunks) for e in side} for side in (train, val, report)]
    assert all(a.isdisjoint(b) for i, a in enumerate(documents) for b in documents[i + 1 :])
    # qrag-eval's default (no validation slice) reports on the same questions
    plain = compose_config("custom", [f"env.path={tmp_path / 'c.jsonl'}", "env.splitter=sentences"])
    assert {e.id for e in load_episodes(plain, run_config_from(plain), "eval", limit=10_000)} == {
        e.id for e in report
    }


def test_the_summary_says_how_the_corpus_was_split(tmp_path: Path) -> None:
    cfg = custom_cfg(write_corpus(tmp_path / "c.jsonl", documents=6, per_document=150))
    split = corpus_split(cfg)
    assert split is not None
    assert (split.lines, split.documents) == (900, 6)
    assert split.questions == {TRAIN: 600, VAL: 150, EVAL: 150}
    run = run_config_from(cfg)
    lines = start_summary(
        RunPlan(
            run=run,
            learner="next_hop",
            device="cpu",
            threads=2,
            data="custom",
            train_questions=600,
            eval_questions=150,
            eval_split=VAL,
            report_split=EVAL,
            split=split,
        )
    )
    text = "\n".join(lines)
    assert "900 questions, 6 documents, 6 groups" in lines[0] and "env.group_by=auto" in lines[0]
    assert lines[1].startswith("split fitted to this corpus")
    assert "would hold 0 validation and 150 report questions" in lines[1]
    assert "train 600 questions (4 groups), validation 150 questions (1 group)" in lines[1]
    assert "report 150 questions (1 group)" in lines[1]
    assert "checkpoints chosen on 150 questions of the validation split" in text
    assert "device cpu, 2 torch threads" in text


def test_generated_data_is_not_split_by_group() -> None:
    assert corpus_split(compose_config("babilong")) is None


# -- errors that name the cause and the fix -----------------------------------------------------
def test_an_empty_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n  \n", encoding="utf-8")
    cfg = custom_cfg(path)
    with pytest.raises(CustomFormatError, match=r"empty\.jsonl: no questions: the file is empty"):
        load_episodes(cfg, run_config_from(cfg), "train")


def test_a_file_without_supporting_facts_names_them_and_feedback_llm(tmp_path: Path) -> None:
    cfg = custom_cfg(write_corpus(tmp_path / "c.jsonl", 30, 3, support=False))
    with pytest.raises(
        QRAGError,
        match=r"none of the 90 questions of .*c\.jsonl has supporting facts .* feedback=llm",
    ):
        load_episodes(cfg, run_config_from(cfg), "eval")  # the validation side: not its size


def test_one_group_names_group_by_line(tmp_path: Path) -> None:
    cfg = custom_cfg(write_corpus(tmp_path / "c.jsonl", documents=1, per_document=50))
    with pytest.raises(
        QRAGError, match=r"the 50 questions of .* share their documents: 1 group.*env.group_by=line"
    ):
        load_episodes(cfg, run_config_from(cfg), "train")
    by_line = custom_cfg(tmp_path / "c.jsonl", "env.group_by=line")  # the fix works
    run = run_config_from(by_line)
    assert load_episodes(by_line, run, "train") and load_episodes(by_line, run, "eval")


def test_too_few_lines_or_meta_values(tmp_path: Path) -> None:
    cfg = custom_cfg(write_corpus(tmp_path / "c.jsonl", 2, 1), "env.group_by=line")
    with pytest.raises(QRAGError, match=r"c\.jsonl has 2 question\(s\); a train, a validation"):
        load_episodes(cfg, run_config_from(cfg), "train")
    path = write_corpus(tmp_path / "m.jsonl", 6, 5, meta={"source": "one"})
    cfg = custom_cfg(path, "env.group_by=meta.source")
    with pytest.raises(QRAGError, match=r"1 value\(s\) of meta.source.*env.group_by=auto"):
        load_episodes(cfg, run_config_from(cfg), "train")


# -- the progress bar under a time budget -------------------------------------------------------
def test_the_bar_ends_where_the_time_budget_ends_the_run() -> None:
    # 10 updates in 60 s, a 38-minute budget: 2220 s left at 6 s an update
    assert expected_updates(10, 0, 400, 60.0, 0.0, 38 * 60) == 10 + 370
    assert expected_updates(10, 0, 100, 60.0, 0.0, 38 * 60) == 100  # the steps end it first
    assert expected_updates(10, 0, 400, 60.0, 0.0, float("inf")) == 400
    assert expected_updates(0, 0, 400, 0.0, 0.0, 60.0) == 400  # no pace yet
    # a resumed run: 20 updates before (600 s), 10 more in 60 s since
    assert expected_updates(30, 20, 400, 660.0, 600.0, 38 * 60) == 30 + 270
    assert expected_updates(30, 20, 400, 2400.0, 600.0, 38 * 60) == 30  # past the budget
