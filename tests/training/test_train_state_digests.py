"""A run's ``last/train_state/`` and ``train_config.yaml`` carry digests: a resume refuses a
damaged file by name with what to do; a run saved by an older version (no digests) resumes with
one warning."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from saved_folders import drop_digests
from signal_cases import tiny_trainer

from qrag_integrations.core.digests import DIGESTS_KEY
from qrag_integrations.core.errors import DamagedCheckpointError, DamagedFileError


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, tiny_bert_dir: Path) -> Path:
    """A folder with the corpus and ``run/`` of a two-update tiny run."""
    base = tmp_path_factory.mktemp("train_state")
    tiny_trainer(base, tiny_bert_dir, 2).train()
    return base


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    """A copy of ``finished_run`` to damage; returns its ``run/last``."""
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    return tmp_path / "run" / "last"


def flip_byte(file: Path, at: int) -> None:
    data = bytearray(file.read_bytes())
    data[at] ^= 0xFF
    file.write_bytes(bytes(data))


def test_the_saves_record_digests_of_the_state_and_the_config(finished_run: Path) -> None:
    for name in ("last", "best"):
        manifest = json.loads((finished_run / "run" / name / "qrag_config.json").read_text())
        assert "train_config.yaml" in manifest[DIGESTS_KEY]["files"]
    state = json.loads((finished_run / "run" / "last" / "train_state" / "state.json").read_text())
    assert set(state[DIGESTS_KEY]["files"]) == {"tensors.safetensors", "optimizer.pt"}


@pytest.mark.parametrize("name", ["tensors.safetensors", "optimizer.pt"])
def test_a_flipped_byte_in_the_training_state_is_refused_by_name(
    run_copy: Path, tiny_bert_dir: Path, name: str
) -> None:
    file = run_copy / "train_state" / name
    flip_byte(file, file.stat().st_size - 7)
    with pytest.raises(
        DamagedFileError,
        match=rf"corrupt .*train_state/{name}: .*restore .*last from a copy.*resume=false",
    ):
        tiny_trainer(run_copy.parents[1], tiny_bert_dir, 2, "resume=true")


def test_an_edited_state_json_is_refused(run_copy: Path, tiny_bert_dir: Path) -> None:
    file = run_copy / "train_state" / "state.json"
    state = json.loads(file.read_text())
    state["agent"]["updates"] += 1
    file.write_text(json.dumps(state))
    with pytest.raises(DamagedFileError, match=r"corrupt .*state\.json: its content differs"):
        tiny_trainer(run_copy.parents[1], tiny_bert_dir, 2, "resume=true")


def test_a_damaged_train_config_yaml_is_refused(run_copy: Path, tiny_bert_dir: Path) -> None:
    flip_byte(run_copy / "train_config.yaml", 0)
    with pytest.raises(DamagedCheckpointError, match=r"corrupt .*last/train_config\.yaml"):
        tiny_trainer(run_copy.parents[1], tiny_bert_dir, 2, "resume=true")


def test_a_run_saved_without_digests_resumes_with_one_warning(
    run_copy: Path, tiny_bert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    drop_digests(run_copy / "train_state" / "state.json")
    drop_digests(run_copy / "qrag_config.json")
    with caplog.at_level(logging.WARNING):
        trainer = tiny_trainer(run_copy.parents[1], tiny_bert_dir, 2, "resume=true")
    assert trainer.agent.updates == 2
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "last was saved without file digests" in warning and "next save" in warning
