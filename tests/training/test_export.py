"""python -m qrag_training.export: a tiny run exported with a card from its own record, no machine
paths, exported again over another base; and no module under training/ imports benchmarks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from qrag_training.evaluate import compose_config
from qrag_training.export import export, main, strip_machine_paths
from qrag_training.trainer import Trainer
from safetensors.torch import load_file
from tiny_run import TINY_RUN

from qrag_integrations import load_model
from qrag_integrations.core.checkpoint import CARD_FILE, CONFIG_FILE, PARTIAL_WEIGHTS_FILE

TRAINING = Path(__file__).resolve().parents[2] / "training"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny_bert_dir: Path) -> Path:
    """Two next-hop updates of a tiny BERT on bAbI qa1, evaluated after each."""
    out = tmp_path_factory.mktemp("export") / "tiny_nh"
    cfg = compose_config(
        "babilong",
        [
            *TINY_RUN,
            "algo=next_hop",
            f"model.base_model={tiny_bert_dir}",
            f"out_dir={out}",
            "steps=2",
            "eval_interval=1",
            "env.position_mode=none",
            "algo.questions_per_step=2",
            "final_report=false",
        ],
    )
    Trainer(cfg).train()
    return out


def _extra(folder: Path) -> dict:
    return json.loads((folder / CONFIG_FILE).read_text())["config"]["extra"]


def test_the_card_is_written_from_the_runs_record(tiny_run: Path, tmp_path: Path) -> None:
    out = export(tiny_run, tmp_path / "shipped")
    model = load_model(str(out))
    assert model.config.trainable_layers == 1
    weights = load_file(str(out / PARTIAL_WEIGHTS_FILE))
    assert {str(t.dtype) for t in weights.values()} == {"torch.float16"}  # fp16 by default
    extra = _extra(out)
    assert extra["run"] == "tiny_nh" and extra["train_config"]["algo"]["kind"] == "next_hop"
    assert [row["step"] for row in extra["validation"]] == [0, 1, 2]
    best = _extra(tiny_run / "best")
    assert extra["step"] == best["step"] and extra["eval"] == best["eval"]

    card = (out / CARD_FILE).read_text()
    assert "Learner `next_hop`" in card
    assert f"Run `tiny_nh`: update {best['step']} of 2 planned" in card
    assert "Training (`babilong`): `babilong` (task qa1, target_tokens 250" in card
    assert "Validation (4 episodes, chose the checkpoint)" in card
    assert f"| **{best['step']}** (exported) |" in card
    assert "Splits: training: seed 0" in card and "validation: seed 999999" in card
    # no machine path: not the run folder, not the tiny base's folder (only the settings table
    # names the base the weights load over, which the checkpoint needs)
    rows = [line for line in card.splitlines() if not line.startswith("| base encoder |")]
    for text in ("\n".join(rows), json.dumps(extra)):
        assert str(tiny_run.parent) not in text
        assert not re.search(r'"/(tmp|home|work)/', text)
    assert extra["train_config"]["out_dir"] == "tiny_nh"
    assert "benchmarks/" not in card


def test_an_exported_checkpoint_exports_again_over_a_base_with_new_settings(
    tiny_run: Path, tmp_path: Path, tiny_bert_dir: Path
) -> None:
    first = export(tiny_run, tmp_path / "first", dtype="fp32")
    main(
        [
            str(first),
            str(tmp_path / "again"),
            "--base-model",
            str(tiny_bert_dir),
            "--set",
            "lexical_depth=10",
            "--set",
            'position_mode="document"',
        ]
    )
    again = tmp_path / "again"
    model = load_model(str(again))
    assert model.config.lexical_depth == 10 and model.config.position_mode.value == "document"
    extra = _extra(again)
    assert extra["rebased_from_base"] == tiny_bert_dir.name  # the path, not kept
    assert extra["validation"] == _extra(first)["validation"]  # the record travels
    card = (again / CARD_FILE).read_text()
    assert "## Validation during the run" in card
    assert "- `lexical_depth`: null -> 10" in card
    assert "- `position_mode`: none -> document" in card
    with pytest.raises(SystemExit, match="unknown QRAGConfig field"):
        main([str(first), str(tmp_path / "bad"), "--set", "lexical_dept=10"])


def test_machine_paths_become_their_last_component() -> None:
    cfg = {
        "model": {"base_model": "/tmp/qrag-remote/base", "name": "minilm"},
        "init_from": ".remote/init/babi_nh_qa2w",
        "out_dir": "/tmp/qrag-runs/s64_q1",
        "env": {"parts": [{"name": "hotpotqa", "path": "/tmp/qrag-remote/hotpotqa.json"}]},
        "hf": {"base_model": "sentence-transformers/all-MiniLM-L6-v2"},
        "packaged": "packaged:all-MiniLM-L6-v2",
        "lr": 3e-5,
    }
    assert strip_machine_paths(cfg) == {
        "model": {"base_model": "base", "name": "minilm"},
        "init_from": "babi_nh_qa2w",
        "out_dir": "s64_q1",
        "env": {"parts": [{"name": "hotpotqa", "path": "hotpotqa.json"}]},
        "hf": {"base_model": "sentence-transformers/all-MiniLM-L6-v2"},  # a hub name stays
        "packaged": "packaged:all-MiniLM-L6-v2",
        "lr": 3e-5,
    }


def test_no_module_under_training_imports_benchmarks() -> None:
    importing = re.compile(r"^\s*(from|import)\s+benchmarks\b", re.MULTILINE)
    offenders = {
        path.relative_to(TRAINING).as_posix()
        for path in sorted(TRAINING.rglob("*.py"))
        if importing.search(path.read_text(encoding="utf-8"))
    }
    assert not offenders  # benchmark sections of a card: benchmarks/general/card.py, via --notes
