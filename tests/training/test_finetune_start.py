"""Fine-tuning a checkpoint (``preset=custom_cpu`` starts from the default model): the run keeps the
starting checkpoint's settings, and the end-of-run report judges it against that checkpoint."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from qrag_training.evaluate import compose_config
from qrag_training.evaluate import main as qrag_eval
from qrag_training.report import (
    BASE,
    BM25,
    DENSE,
    DO_NOT_SHIP,
    HYBRID,
    SHIP,
    START,
    TRAINED,
    checkpoint_report,
    decide,
    recorded_start,
)
from qrag_training.run_model import build_run_model
from qrag_training.trainer import Trainer
from test_train_report import preset_overrides, scores, write_corpus

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.defaults import DEFAULT_CHECKPOINT
from qrag_integrations.core.model import QRAGModel

#: Settings of a shipped-like checkpoint that a plain run's config does not describe.
SHIPPED_LIKE = {
    "position_mode": PositionMode.DOCUMENT_RELATIVE,
    "question_weight": 1.0,
    "max_state_tokens": 64,
    "lexical_depth": 10,
    "lexical_steps": 1,
    "lexical_gap": 0.03,
    "supersede_margin": 0.05,
}


def _checkpoint(tiny_bert_dir: Path, out: Path, **settings: object) -> Path:
    config = QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1, **settings)
    QRAGModel.from_base(config).save_pretrained(str(out))
    return out


def test_keep_init_settings_trains_the_checkpoint_as_saved(tiny_bert_dir: Path, tmp_path: Path):
    saved = _checkpoint(tiny_bert_dir, tmp_path / "ckpt", **SHIPPED_LIKE)
    run = QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1)  # none of those settings
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="keep_init_settings=true trains the checkpoint"):
        build_run_model(run, str(saved), False, cpu)
    for resuming in (False, True):
        model = build_run_model(run, str(saved), resuming, cpu, keep_settings=True)
        for key, value in SHIPPED_LIKE.items():
            assert getattr(model.config, key) == value, key
    fresh = build_run_model(run, None, False, cpu, keep_settings=True)  # no checkpoint: the run's
    assert fresh.config.position_mode is PositionMode.NONE and fresh.config.lexical_depth is None


def test_the_own_corpus_presets_start_from_the_default_and_keep_it() -> None:
    for preset in ("custom_cpu", "custom_gpu"):
        cfg = compose_config("custom", [f"preset={preset}", "env.path=x.jsonl"])
        assert cfg.init_from == DEFAULT_CHECKPOINT
        assert cfg.keep_init_settings is True
        assert cfg.algo.distill_teacher == "init" and cfg.algo.distill_weight > 0
        assert cfg.eval_at_start is True  # the starting model is a candidate for best/
    plain = compose_config("custom", ["env.path=x.jsonl"])
    assert plain.init_from is None and plain.keep_init_settings is False


def test_shipping_needs_a_win_over_the_starting_model() -> None:
    """Beating dense top-k and the base encoder is not enough: a fine-tune that only ties the
    model it started from is not shipped in its place."""
    baselines = {
        BASE: scores(0.5, 0.8, 0.8),
        DENSE: scores(0.5, 0.8, 0.8),
        BM25: scores(0.6, 0.8, 0.8),
    }
    tie = decide({TRAINED: scores(0.8, 0.9, 0.9), START: scores(0.8, 0.9, 0.9), **baselines}, k=3)
    assert tie.verdict == DO_NOT_SHIP
    assert tie.reason.startswith("It does not beat the best baseline beyond the interval")
    assert "hit@1 +0.000 [+0.000, +0.000] vs starting model (0.800)" in tie.reason
    loss = decide({TRAINED: scores(0.8, 0.9, 0.9), START: scores(0.95, 0.9, 0.9), **baselines}, k=3)
    assert loss.verdict == DO_NOT_SHIP and "hit@1 vs starting model -0.150" in loss.reason
    win = decide({TRAINED: scores(0.8, 0.9, 0.9), START: scores(0.6, 0.9, 0.9), **baselines}, k=3)
    assert win.verdict == SHIP
    assert win.reason.startswith("Better than the best baseline beyond the interval on hit@1,")
    assert "hit@1 +0.200 [" in win.reason and "vs starting model (0.600)" in win.reason
    assert "| starting model | 0.600 (+0.200 [" in win.markdown()
    # the start is not the best baseline at hit@1 (BM25 is), but the fine-tune must beat it too
    start_ties_elsewhere = decide(
        {
            TRAINED: scores(0.8, 0.9, 0.9),
            START: scores(0.5, 0.9, 0.9),
            BASE: scores(0.5, 0.8, 0.8),
            DENSE: scores(0.5, 0.8, 0.8),
            BM25: scores(0.7, 0.8, 0.8),
        },
        k=3,
    )
    assert start_ties_elsewhere.verdict == SHIP  # +0.3 over the start at hit@1
    neither = decide(
        {TRAINED: scores(0.5, 0.8, 0.8), START: scores(0.5, 0.8, 0.8), **baselines}, k=3
    )
    assert neither.verdict == DO_NOT_SHIP
    assert neither.reason.startswith("It is worse beyond the interval: hit@1 vs bm25 -0.100")


def test_the_report_finds_the_start_its_run_recorded(tiny_bert_dir: Path, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    start = _checkpoint(tiny_bert_dir, tmp_path / "start")
    trained = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    trained.config.extra = {"step": 5, "train_config": {"init_from": str(start)}}
    trained.save_pretrained(str(tmp_path / "trained"))
    assert recorded_start(trained) == str(start)
    cfg = compose_config("custom", [f"env.path={corpus}", "env.splitter=sentences"])
    from qrag_training.settings import load_episodes, run_config_from

    episodes = load_episodes(cfg, run_config_from(cfg), "eval")
    report = checkpoint_report(str(tmp_path / "trained"), cfg, episodes, 2)
    assert set(report.means) == {TRAINED, START, BASE, DENSE, BM25, HYBRID}
    assert f"starting model: {start}, searched with its own settings" in report.notes
    # the same weights as the start: equal on every question, so not better than it
    assert all(d.diff == 0 for d in report.versus[START].values())
    assert report.verdict == DO_NOT_SHIP
    # a recorded start that is gone is noted, not fatal; a named one that is gone is an error
    start.rename(tmp_path / "moved")
    gone = checkpoint_report(str(tmp_path / "trained"), cfg, episodes, 2)
    assert START not in gone.means and "did not load" in gone.notes[-1]
    with pytest.raises(Exception, match="start"):
        checkpoint_report(str(tmp_path / "trained"), cfg, episodes, 2, start=str(start))
    assert (
        START
        not in checkpoint_report(str(tmp_path / "trained"), cfg, episodes, 2, start=None).means
    )


def test_qrag_eval_start_option(tiny_bert_dir: Path, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    ckpt = _checkpoint(tiny_bert_dir, tmp_path / "ckpt")
    other = _checkpoint(tiny_bert_dir, tmp_path / "other", question_weight=0.0)
    common = [str(ckpt), "--jsonl", str(corpus), "--set", "env.splitter=sentences", "--steps", "2"]
    qrag_eval([*common, "--compare-baselines", "--start", str(other), "--out", str(tmp_path / "a")])
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert START in report["means"] and f"starting model: {other}" in " ".join(report["notes"])
    qrag_eval([*common, "--compare-baselines", "--start", "none", "--out", str(tmp_path / "b")])
    assert START not in json.loads((tmp_path / "b" / "report.json").read_text())["means"]
    with pytest.raises(SystemExit):
        qrag_eval([*common, "--start", str(other)])  # --start without --compare-baselines


@pytest.mark.slow
def test_preset_custom_cpu_fine_tunes_a_checkpoint_and_reports_against_it(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    start = _checkpoint(
        tiny_bert_dir, tmp_path / "start", **{**SHIPPED_LIKE, "max_state_tokens": 192}
    )
    corpus = write_corpus(tmp_path / "corpus.jsonl", articles=100)
    overrides = [
        o
        for o in preset_overrides(tmp_path, tiny_bert_dir, corpus)
        if not o.startswith("init_from=")
    ]
    cfg = compose_config("custom", [*overrides, f"init_from={start}", "report_episodes=30"])
    trainer = Trainer(cfg)
    assert trainer.model.config.position_mode is PositionMode.DOCUMENT_RELATIVE
    trainer.train()
    run = tmp_path / "run"
    saved = json.loads((run / "best" / "qrag_config.json").read_text())["config"]
    for key in ("lexical_depth", "lexical_steps", "lexical_gap", "supersede_margin"):
        assert saved[key] == SHIPPED_LIKE[key], key
    assert saved["question_weight"] == 1.0 and saved["position_mode"] == "document_relative"
    report = json.loads((run / "report.json").read_text())
    assert START in report["means"] and report["n"] == 30
    assert f"starting model: {start}, searched with its own settings" in report["notes"]
    assert "## Against the baselines (end of the run)" in (run / "best" / "README.md").read_text()


def test_kept_settings_include_the_checkpoints_base_encoder(
    tiny_bert_dir: Path, tiny_bert_dir_48: Path, tmp_path: Path
) -> None:
    """Keeping the checkpoint's settings keeps its base encoder too: the run trains what it holds."""
    saved = _checkpoint(tiny_bert_dir_48, tmp_path / "ckpt")
    run = dataclasses.replace(QRAGConfig(base_model=str(tiny_bert_dir)), trainable_layers=1)
    model = build_run_model(run, str(saved), False, torch.device("cpu"), keep_settings=True)
    assert model.config.base_model == str(tiny_bert_dir_48)
