"""A misspelled ``qrag-train`` override ends in one line with the setting it most likely meant."""

from __future__ import annotations

import pytest
from qrag_training.overrides import closest_key
from qrag_training.train import check_overrides


def refused(capsys: pytest.CaptureFixture[str], *overrides: str) -> str:
    with pytest.raises(SystemExit) as info:
        check_overrides(list(overrides))
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("qrag-train: error: "), err
    return err


@pytest.mark.parametrize(
    ("overrides", "meant"),
    [
        (
            ["preset=custom_cpu", "env.chunksize=300"],
            "unknown setting env.chunksize (did you mean env.chunk_size?)",
        ),
        (
            ["env=custom", "chunk_size=300"],
            "unknown setting chunk_size (did you mean env.chunk_size?)",
        ),
        (["stesp=10"], "unknown setting stesp (did you mean steps?)"),
        (["algo=next_hop", "algo.questions_per_stp=4"], "(did you mean algo.questions_per_step?)"),
        (["evn.path=x.jsonl", "env=custom"], "unknown setting evn.path (did you mean env.path?)"),
        (
            ["env=custm"],
            "no env/custm in the config (did you mean env=custom?); the env options are babilong, custom",
        ),
        (
            ["preset=custom_cpuu"],
            "no preset/custom_cpuu in the config (did you mean preset=custom_cpu?)",
        ),
    ],
)
def test_did_you_mean(capsys, overrides: list[str], meant: str) -> None:
    err = refused(capsys, *overrides)
    assert meant in err
    assert "+env" not in err and "To append" not in err  # not Hydra's advice to add a key


def test_no_guess_where_nothing_is_close(capsys) -> None:
    err = refused(capsys, "env.zzzz=1")
    assert "unknown setting env.zzzz" in err and "did you mean" not in err
    assert "--cfg job prints every setting" in err


def test_good_overrides_pass_and_bad_syntax_keeps_hydras_message(capsys) -> None:
    check_overrides(["preset=custom_cpu", "env.chunk_size=300", "+extra=1"])
    err = refused(capsys, "steps=[1,2")
    assert "[1,2" in err and "did you mean" not in err


def test_closest_key() -> None:
    keys = ["steps", "batch_size", "env", "env.path", "env.chunk_size", "env.eval", "env.eval.path"]
    assert closest_key("path", keys) == "env.path"  # the shallowest setting of that name
    assert closest_key("env.chunksize", keys) == "env.chunk_size"
    assert closest_key("env.zzz", keys) is None
    assert closest_key("stpes", keys) == "steps"
