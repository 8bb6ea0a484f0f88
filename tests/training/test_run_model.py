"""A run that starts from another checkpoint takes the search settings from its own config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from qrag_training.run_model import build_run_model

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.model import QRAGModel


def _saved(tiny_bert_dir: Path, out: Path, **settings: object) -> QRAGConfig:
    config = QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1)
    model = QRAGModel.from_base(dataclasses.replace(config, **settings))
    model.save_pretrained(str(out))
    return config


def test_init_from_a_checkpoint_with_search_settings(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """A shipped checkpoint (BM25 fusion, its own anchoring) starts a run without a copy: the
    run's settings replace the search settings, the weights are the checkpoint's."""
    run = _saved(
        tiny_bert_dir,
        tmp_path / "ckpt",
        lexical_depth=10,
        lexical_steps=1,
        question_weight=1.0,
        supersede_margin=0.05,
        supersede_similarity=0.7,
    )
    model = build_run_model(run, str(tmp_path / "ckpt"), False, torch.device("cpu"))
    assert model.config.lexical_depth is None and model.config.lexical_steps is None
    assert model.config.supersede_margin is None and model.config.supersede_similarity == 0.8
    assert model.config.question_weight == run.question_weight


def test_init_from_a_different_model_is_refused(tiny_bert_dir: Path, tmp_path: Path) -> None:
    run = _saved(tiny_bert_dir, tmp_path / "ckpt", position_mode=PositionMode.RELATIVE)
    with pytest.raises(ValueError, match="position_mode"):
        build_run_model(run, str(tmp_path / "ckpt"), False, torch.device("cpu"))
