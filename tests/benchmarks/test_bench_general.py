"""general/run.py: per-question metrics, model specs with search settings, and a tiny run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qrag_training.data.episode import Episode
from qrag_training.metrics import Retrieval

from benchmarks.general import card as general_card
from benchmarks.general import run as bench_general
from benchmarks.harness import model_specs, noise_sources


def test_scores_read_the_first_picks() -> None:
    episodes = [
        Episode("a", "q?", ["x", "y", "z"], [1]),
        Episode("b", "q?", ["x", "y", "z"], [0, 2]),
    ]
    results = [Retrieval([0, 1, 2]), Retrieval([2, 0, 1])]
    assert bench_general.scores(episodes, results, "squad") == {
        "hit@1": [0.0, 0.0],
        "hit@3": [1.0, 1.0],
    }
    assert bench_general.scores(episodes, results, "babilong")["em@facts"] == [0.0, 1.0]


def test_model_specs_take_search_settings(tiny_bert_dir: Path) -> None:
    assert model_specs.split_settings("packaged:all-MiniLM-L6-v2:question_weight=1") == (
        "packaged:all-MiniLM-L6-v2",
        ":",
        "question_weight=1",
    )
    assert model_specs.split_settings("packaged:qrag-babi-demo")[0] == "packaged:qrag-babi-demo"
    model, search = model_specs.load_with_settings(
        f"{tiny_bert_dir}:question_weight=0.5,max_chunk_tokens=32,lexical_depth=20"
    )
    assert model.config.question_weight == 0.5 and model.config.max_chunk_tokens == 32
    assert search.lexical_depth == 20
    with pytest.raises(ValueError, match="unknown search setting 'lr'"):
        model_specs.load_with_settings(f"{tiny_bert_dir}:lr=1")
    # benchmarks that search with the model's own settings get the fusion fields on its config
    model = model_specs.load_with_model_settings(
        f"{tiny_bert_dir}:question_weight=0,lexical_depth=10,lexical_steps=1"
    )
    assert model.config.question_weight == 0 and model.config.lexical_depth == 10
    assert model.config.lexical_steps == 1
    off = model_specs.load_with_model_settings(f"{tiny_bert_dir}:lexical_depth=0")
    assert off.config.lexical_depth is None  # 0 turns fusion off, as in SearchSettings
    assert model_specs.checkpoint_of(f"{tiny_bert_dir}:question_weight=0") == str(tiny_bert_dir)


def test_tiny_run_writes_every_cell_and_paired_differences(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "general.json"
    bench_general.main(
        [
            "--base",
            str(tiny_bert_dir),
            "--model",
            f"w1={tiny_bert_dir}:question_weight=1",
            "--cells",
            "squad,babilong-mixed-300,ruler-single-300",
            "--squad-n",
            "6",
            "--babi-n",
            "1",
            "--ruler-n",
            "2",
            "--threads",
            "1",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
    assert [c["cell"] for c in result["cells"]] == [
        "squad",
        "babilong-mixed-300",
        "ruler-single-300",
    ]
    squad = result["cells"][0]
    assert squad["n"] == 6 and set(squad["metrics"]) == {
        "untrained",
        "w1",
        "dense",
        "bm25",
        "dense+bm25",
    }
    assert squad["paired_vs_dense"]["w1"]["hit@1"]["verdict"] in ("better", "worse", "tie")
    babi = result["cells"][1]
    assert set(babi["by_task"]) == {"qa1", "qa2", "qa3", "qa4", "qa5"}
    assert set(babi["by_task_paired_vs_dense"]["qa2"]) == {"untrained", "w1", "bm25", "dense+bm25"}
    assert babi["by_task_paired_vs_dense"]["qa2"]["w1"]["em@6"]["verdict"] in (
        "better",
        "worse",
        "tie",
    )
    assert len(babi["per_question"]["dense"]["em@6"]) == babi["n"] == 5
    assert result["split"] == "val" and result["seed"] == bench_general.VAL_SEED


def test_card_section_lists_the_losses_and_replaces_itself(tmp_path: Path) -> None:
    cell = {
        "cell": "squad",
        "n": 400,
        "metrics": {"demo": {"hit@1": 0.44}, "dense": {"hit@1": 0.67}},
        "paired_vs_dense": {
            "demo": {"hit@1": {"diff": -0.23, "low": -0.28, "high": -0.17, "verdict": "worse"}}
        },
    }
    result = {"split": "val", "seed": 555555, "machine": {"cpu_count": 2}, "cells": [cell]}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    card = tmp_path / "README.md"
    card.write_text("# card\n\n## Training\n\ntext\n")
    general_card.main(["limits", str(path), "demo", "--card", str(card)])
    text = card.read_text()
    assert "| squad | 400 | hit@1 | 0.440 | 0.670 | -0.230 [-0.280, -0.170] | **worse** |" in text
    assert "Worse than dense top-k on: squad hit@1." in text and text.startswith(
        "# card\n\n## Training"
    )
    general_card.main(
        ["limits", str(path), "demo", "--card", str(card)]
    )  # again: replaced, not appended
    assert card.read_text().count(general_card.HEADING) == 1
    with pytest.raises(KeyError, match="'other'"):
        general_card.main(["limits", str(path), "other", "--card", str(card)])


def test_card_section_against_the_default_pairs_per_question(tmp_path: Path) -> None:
    cell = {
        "cell": "hotpotqa",
        "n": 40,
        "metrics": {"narrow": {"em@2": 0.75, "em@4": 0.5}, "default": {"em@2": 0.25, "em@4": 0.5}},
        "per_question": {
            "narrow": {"em@2": [1.0] * 30 + [0.0] * 10, "em@4": [1.0, 0.0] * 20},
            "default": {"em@2": [0.0] * 30 + [1.0] * 10, "em@4": [0.0, 1.0] * 20},
        },
    }
    result = {
        "split": "test",
        "seed": 7,
        "machine": {"cpu_count": 2},
        "models": {"narrow": "packaged:narrow", "default": "packaged:default"},
        "cells": [cell],
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    card = tmp_path / "README.md"
    card.write_text("# card\n\n## Where it loses to dense top-k\n\nkept\n")
    general_card.main(["limits", str(path), "narrow", "--card", str(card), "--against", "default"])
    text = card.read_text()
    assert "| hotpotqa | 40 | em@2 | 0.750 | 0.250 | +0.500 [" in text
    assert "Better than it on: hotpotqa em@2." in text and "Worse than it on: no cell." in text
    assert "em@4 | 0.500 | 0.500 | +0.000 [" in text  # each question differs: a wide tie
    assert "## Where it loses to dense top-k\n\nkept" in text  # the other section is left alone
    general_card.main(["limits", str(path), "narrow", "--card", str(card), "--against", "default"])
    assert card.read_text().count(general_card.HEADING_AGAINST) == 1
    with pytest.raises(KeyError, match="'other'"):
        general_card.main(
            ["limits", str(path), "narrow", "--card", str(card), "--against", "other"]
        )


def test_card_section_against_the_default_reads_further_runs(tmp_path: Path) -> None:
    def run(seed: int, cell: str, mine: list[float]) -> Path:
        n = len(mine)
        result = {
            "split": "test",
            "seed": seed,
            "machine": {"cpu_count": 2},
            "models": {"narrow": "packaged:narrow", "default": "packaged:default"},
            "cells": [
                {
                    "cell": cell,
                    "n": n,
                    "metrics": {"narrow": {"m": sum(mine) / n}, "default": {"m": 0.0}},
                    "per_question": {"narrow": {"m": mine}, "default": {"m": [0.0] * n}},
                }
            ],
        }
        path = tmp_path / f"run{seed}.json"
        path.write_text(json.dumps(result))
        return path

    new, old, again = (
        run(2, "babi", [1.0] * 20),
        run(1, "hotpotqa", [0.0] * 20),
        run(3, "babi", [0.0] * 20),
    )
    card = tmp_path / "README.md"
    card.write_text("# card\n")
    general_card.main(
        [
            "limits",
            str(new),
            "narrow",
            "--card",
            str(card),
            "--against",
            "default",
            "--also",
            str(old),
            "--also",
            str(again),
        ]
    )
    text = card.read_text()
    assert "babi: test split, seed 2," in text and "hotpotqa: test split, seed 1," in text
    assert "seed 3" not in text  # its only cell is the first run's
    assert (
        "| babi | 20 | m | 1.000 | 0.000 | +1.000 [" in text
        and "| hotpotqa | 20 | m | 0.000 |" in text
    )
    with pytest.raises(SystemExit):
        general_card.main(["limits", str(new), "narrow", "--card", str(card), "--also", str(old)])


def test_report_marks_paired_verdicts_and_merges_files() -> None:
    from benchmarks.general import report as general_report

    def result(method: str, value: float, verdict: str) -> dict:
        return {
            "split": "val",
            "seed": 1,
            "cells": [
                {
                    "cell": "squad",
                    "n": 10,
                    "metrics": {method: {"hit@1": value}, "dense": {"hit@1": 0.5}},
                    "paired_vs_dense": {
                        method: {
                            "hit@1": {"diff": value - 0.5, "low": 0, "high": 0, "verdict": verdict}
                        }
                    },
                }
            ],
        }

    text = general_report.table([result("a", 0.7, "better"), result("b", 0.2, "worse")])
    assert (
        "| a | 0.700 (+0.200*) |" in text
        and "| b | 0.200 (-0.300!) |" in text
        and "| dense | 0.500 |" in text
    )
    other = result("c", 0.5, "tie")
    other["seed"] = 2
    with pytest.raises(ValueError, match="share split, seed and cells"):
        general_report.table([result("a", 0.7, "better"), other])


def test_the_essay_noise_cell_hides_stories_in_essay_sentences() -> None:
    episodes = bench_general.cell_episodes("babilong-essays-500", "val", 1, 5)
    pool = set(noise_sources.essay_noise().sentences)
    assert {e.meta["noise"] for e in episodes} == {"essays"}
    for e in episodes:
        story = set(e.meta["story_positions"])
        noise = [c for i, c in enumerate(e.chunks) if i not in story]
        assert noise and all(c in pool for c in noise)


def test_the_hotpotqa_cell_can_skip_the_questions_an_earlier_report_read() -> None:
    first = bench_general.cell_episodes("hotpotqa", "val", 5, 0)
    later = bench_general.cell_episodes("hotpotqa", "val", 3, 0, skip=2)
    assert len(first) == 5
    assert [e.id for e in later] == [e.id for e in first[2:]]


def test_the_squad_cell_pools_only_the_articles_asked_for() -> None:
    episodes = bench_general.cell_episodes("squad", "val", 40, 0, articles=(0, 9))
    articles = {int(e.id.split("-")[1]) for e in episodes}
    assert len(episodes) == 40 and articles <= set(range(9))
    every = bench_general.cell_episodes("squad", "val", 400, 0)
    assert {int(e.id.split("-")[1]) for e in every} & set(range(9, 18))
    assert len(episodes[0].chunks) < len(every[0].chunks)  # a pool of 9 articles, not 18
    with pytest.raises(SystemExit):
        bench_general.main(["--squad-articles", "5-20"])  # 18-34 are reserved


def test_the_general_card_lists_tasks_below_dense_with_their_interval(tmp_path: Path) -> None:
    paired = {"diff": -0.1, "low": -0.2, "high": 0.0, "verdict": "tie"}
    cell = {
        "cell": "babilong-mixed-4000",
        "n": 10,
        "by_task": {
            "qa1": {
                "general": {"em@facts": 0.4, "em@6": 1.0},
                "dense": {"em@facts": 0.5, "em@6": 1.0},
            },
            "qa2": {
                "general": {"em@facts": 0.3, "em@6": 0.9},
                "dense": {"em@facts": 0.0, "em@6": 0.1},
            },
        },
        "by_task_paired_vs_dense": {"qa1": {"general": {"em@facts": paired}}},
    }
    path = tmp_path / "test.json"
    path.write_text(json.dumps({"cells": [cell]}))
    want = (
        "- `test.json`, babilong-mixed-4000, qa1, em@facts: 0.400 vs dense 0.500 "
        "(5 stories, paired -0.100 [-0.200, +0.000] tie)"
    )
    assert general_card.losses([path], "general") == [want]
    # several methods shown: each line names its method
    cell["by_task"]["qa1"]["t11"] = {"em@facts": 0.45, "em@6": 1.0}
    path.write_text(json.dumps({"cells": [cell]}))
    two = general_card.losses([path], "general,t11")
    assert two[0] == want.replace("em@facts:", "em@facts (`general`):")
    assert (
        two[1]
        == "- `test.json`, babilong-mixed-4000, qa1, em@facts (`t11`): 0.450 vs dense 0.500 (5 stories)"
    )


def test_the_card_notes_hold_the_tables_and_go_to_the_exporter(tmp_path: Path, capsys) -> None:
    from qrag_training.export import card_notes

    def result(split: str, seed: int, value: float) -> dict:
        paired = {"diff": value - 0.5, "low": -0.1, "high": 0.1, "verdict": "tie"}
        return {
            "split": split,
            "seed": seed,
            "machine": {"threads": 2, "cpu_count": 2},
            "models": {"default": "packaged:default", "other": "packaged:other"},
            "cells": [
                {
                    "cell": "babilong-mixed-4000",
                    "n": 10,
                    "metrics": {
                        "default": {"em@facts": value},
                        "other": {"em@facts": 0.9},
                        "dense": {"em@facts": 0.5},
                    },
                    "paired_vs_dense": {"default": {"em@facts": paired}, "other": {}},
                    "by_task": {
                        "qa1": {"default": {"em@facts": value}, "dense": {"em@facts": 0.5}}
                    },
                }
            ],
        }

    val, test = tmp_path / "val.json", tmp_path / "test.json"
    val.write_text(json.dumps(result("val", 1, 0.6)))
    test.write_text(json.dumps(result("test", 2, 0.4)))
    notes = tmp_path / "notes.md"
    general_card.main(
        [
            "tables",
            "--val",
            str(val),
            "--test",
            str(test),
            "--legend",
            "`default` = it",
            "--out",
            str(notes),
        ]
    )
    text = notes.read_text()
    assert text.startswith(
        general_card.HEADING_VAL + "\n\n`default` = it.\n\n`val.json` (val split"
    )
    assert general_card.HEADING_TEST in text and "| default | 0.400 (-0.100) |" in text
    assert "| other |" not in text  # only the methods named are shown
    assert text.endswith(
        general_card.HEADING
        + "\n\nbAbI tasks whose mean is below dense top-k's on the same stories (with the paired 95%\n"
        "interval where the result file keeps per-question scores):\n\n"
        "- `test.json`, babilong-mixed-4000, qa1, em@facts: 0.400 vs dense 0.500 (10 stories)\n"
    )
    assert card_notes({}, notes=text).endswith(text)  # the exporter's --notes appends it as is
    with pytest.raises(SystemExit):
        general_card.main(["tables", "--val", str(tmp_path / "missing.json")])
    general_card.main(["limits", str(val), "default"])  # no --out, no --card: standard output
    assert capsys.readouterr().out.startswith(general_card.HEADING + "\n\nPaired on the same")


def test_noise_from_a_test_split_is_refused_outside_test_runs(capsys) -> None:
    with pytest.raises(SystemExit):
        bench_general.main(["--cells", "babilong-wiki-4000", "--split", "val"])
    assert "drawn from a test split" in capsys.readouterr().err
