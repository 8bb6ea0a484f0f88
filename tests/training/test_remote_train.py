"""training/tools/remote_train.sh rehearsed on the CPU (QUICK=1) over a tiny BERT: one preset
continued from a checkpoint (INIT), trained, exported with its card, the record packed."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel

#: A few updates in a subprocess, then the export in another (tens of seconds).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_a_preset_runs_and_comes_back_exported(tmp_path: Path, tiny_bert_dir: Path) -> None:
    unpacked = tmp_path / "remote"  # what remote_bundle.py unpack leaves there
    (unpacked / "site").mkdir(parents=True)
    (unpacked / "base").symlink_to(tiny_bert_dir)
    (unpacked / ".unpacked").touch()
    # a checkpoint of the model babi_gpu trains (relative positions, the paper's scores)
    config = QRAGConfig(
        base_model=str(tiny_bert_dir),
        position_mode="relative",
        normalize=False,
        question_weight=0.0,
        state_order="document",
        trainable_layers=2,
    )
    save_pretrained(QRAGModel.from_base(config), tmp_path / "init")
    out = tmp_path / "out"
    env = dict(
        os.environ,
        PY=sys.executable,
        DEV="cpu",
        QUICK="1",
        NAME="demo",
        INIT=str(tmp_path / "init"),
        W=str(unpacked),
        R=str(tmp_path / "runs"),
        OUT=str(out),
    )
    proc = subprocess.run(
        ["bash", "training/tools/remote_train.sh", "babi_gpu", "torch_threads=1"]
        + ["env.target_tokens=[300]", "env.eval_target_tokens=300", "eval_episodes=4"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with tarfile.open(out / "demo.tar") as tar:
        tar.extractall(tmp_path / "back", filter="data")
    card = (tmp_path / "back" / "demo" / "README.md").read_text()
    assert "Run `demo`: update" in card and "Learner `next_hop`" in card
    assert "Started from `init-demo` (a checkpoint of an earlier run, continued)." in card
    assert str(tmp_path) not in card.replace(f"`{unpacked / 'base'}`", "")
    with tarfile.open(out / "demo-record.tar.gz") as tar:
        assert {"demo.log", "demo/metrics.jsonl", "demo/best/train_config.yaml"} <= set(
            tar.getnames()
        )
