"""The end-of-run comparison with the baselines and its verdict (qrag_training.report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qrag_training.evaluate import compose_config
from qrag_training.evaluate import main as qrag_eval
from qrag_training.report import BASE, BM25, DENSE, DO_NOT_SHIP, HYBRID, SHIP, TRAINED, decide
from qrag_training.trainer import Trainer

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel

N = 120


def scores(hit1: float, hitk: float, em: float, n: int = N) -> dict[str, list[float]]:
    """Per-question scores with the given share of ones (first questions)."""

    def ones(p: float) -> list[float]:
        return [1.0] * round(p * n) + [0.0] * (n - round(p * n))

    return {"hit@1": ones(hit1), "hit@3": ones(hitk), "fact_em": ones(em)}


def test_better_than_the_best_baseline_and_no_loss_ships() -> None:
    report = decide(
        {
            TRAINED: scores(0.8, 0.9, 0.9),
            BASE: scores(0.5, 0.8, 0.8),
            DENSE: scores(0.5, 0.8, 0.8),
            BM25: scores(0.6, 0.85, 0.85),
            HYBRID: scores(0.65, 0.9, 0.9),
        },
        k=3,
    )
    assert report.verdict == SHIP
    assert report.reason.startswith(
        "Better than the best baseline beyond the interval on hit@1, and worse than none of 4 "
        "baselines on any metric, on 120 held-out questions: hit@1 +0.150 ["
    )
    assert "vs dense+bm25 (0.650); hit@3 +0.000 [+0.000, +0.000] vs dense+bm25 (0.900)." in (
        report.reason
    )
    md = report.markdown()
    assert "| trained | 0.800 | 0.900 | 0.900 |" in md and "**Verdict: better.**" in md


def test_a_loss_to_bm25_or_the_hybrid_is_not_shipped() -> None:
    """Beating dense top-k is not enough where a user's BM25 or dense+BM25 does better."""
    for lexical in (BM25, HYBRID):
        report = decide(
            {
                TRAINED: scores(0.8, 0.9, 0.9),
                BASE: scores(0.5, 0.8, 0.8),
                DENSE: scores(0.5, 0.8, 0.8),
                lexical: scores(0.9, 0.95, 0.95),
            },
            k=3,
        )
        assert report.verdict == DO_NOT_SHIP
        assert report.reason.startswith(
            f"It is worse beyond the interval: hit@1 vs {lexical} -0.100"
        )


def test_beating_dense_but_tying_the_best_baseline_is_not_shipped() -> None:
    report = decide(
        {
            TRAINED: scores(0.8, 0.9, 0.9),
            BASE: scores(0.5, 0.8, 0.8),
            DENSE: scores(0.5, 0.8, 0.8),
            BM25: scores(0.775, 0.9, 0.9),
        },
        k=3,
    )
    assert report.verdict == DO_NOT_SHIP
    assert report.versus[DENSE]["hit@1"].verdict == "better"
    assert report.reason.startswith(
        "It does not beat the best baseline beyond the interval on 120 held-out questions: "
        "hit@1 +0.025 ["
    )
    assert "vs bm25 (0.775)" in report.reason


def test_a_loss_to_the_base_encoder_is_not_shipped() -> None:
    report = decide(
        {
            TRAINED: scores(0.8, 0.7, 0.7),
            BASE: scores(0.5, 0.95, 0.95),
            DENSE: scores(0.5, 0.7, 0.7),
        },
        k=3,
    )
    assert report.verdict == DO_NOT_SHIP
    assert "hit@3 vs base multi-step -0.250" in report.reason


def test_a_tie_with_dense_is_not_shipped() -> None:
    same = scores(0.6, 0.8, 0.8)
    report = decide({TRAINED: same, BASE: same, DENSE: same}, k=3, notes=["questions: test"])
    assert report.verdict == DO_NOT_SHIP
    assert "does not beat the best baseline" in report.reason
    assert report.markdown().endswith("- questions: test")
    assert json.loads(json.dumps(report.to_dict()))["verdict"] == DO_NOT_SHIP


def write_corpus(path: Path, articles: int = 30, paragraphs: int = 6) -> Path:
    """Articles of six paragraphs; three questions each, naming their paragraph's place."""
    words = ["kitchen", "garden", "office", "hallway", "bedroom", "bathroom", "football", "apple"]
    lines = []
    for a in range(articles):
        texts = [
            f"the {words[(a + p) % len(words)]} is where mary was on day {a}."
            for p in range(paragraphs)
        ]
        for q in range(3):
            word = words[(a + q) % len(words)]
            lines.append(
                {"id": f"a{a}q{q}", "question": f"who was in the {word}?", "chunks": texts}
            )
            lines[-1]["support"] = [q]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def broken_checkpoint(tiny_bert_dir: Path, out: Path) -> Path:
    """A checkpoint whose state encoder is noise: what a diverged run leaves."""
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir)))
    for p in model.state_encoder.parameters():
        p.data.normal_(0.0, 3.0)
    model.save_pretrained(str(out))
    return out


def test_qrag_eval_compare_baselines_says_do_not_ship_a_broken_checkpoint(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    checkpoint = broken_checkpoint(tiny_bert_dir, tmp_path / "broken")
    out = tmp_path / "eval"
    qrag_eval(
        [str(checkpoint), "--jsonl", str(corpus), "--set", "env.splitter=sentences"]
        + ["--steps", "2", "--compare-baselines", "--out", str(out)]
    )
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == DO_NOT_SHIP and report["k"] == 2
    assert set(report["means"]) == {TRAINED, BASE, DENSE, BM25, HYBRID}
    assert "lines grouped by 'auto'" in report["notes"][0]
    assert "**Verdict: not better: do not ship this checkpoint.**" in capsys.readouterr().err
    assert (out / "report.md").read_text().startswith(f"{report['n']} held-out questions")


@pytest.mark.slow
def test_a_training_run_ends_with_the_report_in_its_card(tmp_path: Path, tiny_bert_dir: Path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    cfg = compose_config(
        "custom",
        [
            "model=tiny",
            f"model.base_model={tiny_bert_dir}",
            f"out_dir={tmp_path / 'run'}",
            f"env.path={corpus}",
            "env.splitter=sentences",
            "env.max_steps=2",
            "eval_at_start=false",  # best = the end of the run, whatever it is
            "steps=2",
            "batch_size=8",
            "envs_parallel=4",
            "eval_interval=2",
            "eval_episodes=20",
            "torch_threads=1",
            "algo.warmup=1",
            "algo.learning_start=4",
            "model.trainable_layers=1",
            "algo.lr=3.0",  # deliberately broken: steps this large wreck the trained layer
        ],
    )
    Trainer(cfg).train()
    run = tmp_path / "run"
    report = json.loads((run / "report.json").read_text())
    assert report["verdict"] == DO_NOT_SHIP
    assert report["reason"].startswith("It is worse beyond the interval: hit@1 vs ")
    assert "hit@1 vs dense top-k" in report["reason"]
    card = (run / "best" / "README.md").read_text()
    assert "## Against the baselines (end of the run)" in card
    assert "not better: do not ship this checkpoint" in card
    assert (
        "also chose the checkpoint (best fact_em on these questions)"
        in (run / "report.md").read_text()
    )


def preset_overrides(tmp_path: Path, tiny_bert_dir: Path, corpus: Path) -> list[str]:
    return [
        "preset=custom_cpu",
        "init_from=null",  # the tiny BERT itself, not the default model
        "model=tiny",
        f"model.base_model={tiny_bert_dir}",
        f"out_dir={tmp_path / 'run'}",
        f"env.path={corpus}",
        "env.splitter=sentences",
        "steps=2",
        "eval_interval=2",
        "eval_episodes=20",
        "torch_threads=1",
        "algo.warmup=1",
        "algo.questions_per_step=4",
        "model.trainable_layers=1",
    ]


@pytest.mark.slow
def test_preset_custom_cpu_chooses_on_validation_and_reports_on_the_held_out_bucket(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", articles=100)
    cfg = compose_config("custom", preset_overrides(tmp_path, tiny_bert_dir, corpus))
    assert cfg.time_budget_minutes == 35 and cfg.env.eval_hash_split == "val"
    assert cfg.algo.autocast == "auto"
    trainer = Trainer(cfg)
    assert {e.meta["split_key"] for e in trainer.eval_episodes}  # the validation slice
    trainer.train()
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["notes"] == [
        "questions: custom, held-out side (hash split 'eval'), lines grouped by 'auto'"
    ]
    held_out = {e.id for e in trainer.eval_episodes}
    assert report["n"] > 0 and held_out  # two disjoint sides: validation chose, eval reports


def test_a_small_corpus_still_gets_a_validation_slice(tmp_path: Path, tiny_bert_dir: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", articles=3)  # 3 groups: a fitted split
    cfg = compose_config("custom", preset_overrides(tmp_path, tiny_bert_dir, corpus))
    validation = {e.meta["split_key"] for e in Trainer(cfg).eval_episodes}
    assert len(validation) == 1  # one article chooses, one reports, one trains
