"""Every command answers bad input with one line naming the problem and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qrag_integrations.cli_errors import fail, one_line, one_line_errors

REPO = Path(__file__).resolve().parents[2]


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], call, prog: str, *fragments: str) -> None:
    with pytest.raises(SystemExit) as info:
        call()
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith(f"{prog}: error: ")
    for fragment in fragments:
        assert fragment in err[-1]
    assert "Traceback" not in "\n".join(err)


def test_messages_become_one_line() -> None:
    hydra_like = "Could not override 'x'.\nTo append use +x=1\n    full_key: x\n    object_type=dict\n\nSet the environment variable HYDRA_FULL_ERROR=1 for more"
    assert one_line(hydra_like) == "Could not override 'x'. To append use +x=1; full_key: x"
    assert one_line("") == "bad input"


def test_the_helper_exits_2_and_lets_other_errors_through(capsys) -> None:
    _one_line_exit_2(capsys, lambda: fail("prog", "it is broken"), "prog", "it is broken")
    with pytest.raises(KeyError), one_line_errors("prog"):
        raise KeyError("a bug, not bad input: keeps its traceback")


def test_qrag_eval_missing_checkpoint(capsys, tmp_path: Path) -> None:
    from qrag_training.evaluate import main

    missing = tmp_path / "nope"
    _one_line_exit_2(
        capsys,
        lambda: main([str(missing), "--env", "babilong", "--n", "1"]),
        "qrag-eval",
        str(missing),
    )


def test_qrag_eval_unknown_env(capsys) -> None:
    from qrag_training.evaluate import main

    _one_line_exit_2(
        capsys, lambda: main(["--baseline", "dense", "--env", "nosuch"]), "qrag-eval", "nosuch"
    )


def test_qrag_train_bad_overrides(capsys) -> None:
    from qrag_training.train import check_overrides

    _one_line_exit_2(capsys, lambda: check_overrides(["nosuchkey=1"]), "qrag-train", "nosuchkey")
    _one_line_exit_2(capsys, lambda: check_overrides(["env=nosuch"]), "qrag-train", "env/nosuch")
    check_overrides(["steps=3", "env=hotpotqa"])  # good overrides pass
    check_overrides(["--cfg", "job"])  # Hydra's own flags go to Hydra unchecked


def test_qrag_train_command_refuses_a_missing_init_checkpoint(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "training"), str(REPO), env.get("PYTHONPATH", "")]
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "qrag_training.train",
            "model=tiny",
            f"model.base_model={tiny_bert_dir}",
            f"out_dir={tmp_path / 'run'}",
            f"init_from={tmp_path / 'missing'}",
            "steps=1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("qrag-train: error: ")
        and "missing" in last
        and "Traceback" not in out.stderr
    )


def test_qrag_demo_missing_checkpoint_and_unknown_reader(capsys, tmp_path: Path) -> None:
    from qrag_integrations.demo import main

    _one_line_exit_2(
        capsys,
        lambda: main(["--checkpoint", str(tmp_path / "nope"), "--reader", "none"]),
        "qrag-demo",
        "nope",
    )


def test_qrag_embed_missing_corpus(capsys, tmp_path: Path) -> None:
    from qrag_integrations.ingest.cli import main

    _one_line_exit_2(
        capsys,
        lambda: main([str(tmp_path / "none.txt"), "--cache", str(tmp_path / "c")]),
        "qrag-embed",
        "none.txt",
    )
