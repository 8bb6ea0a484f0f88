"""Observable behaviour (picks, Q-values, ``qrag-eval`` metrics) equals the recorded snapshot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # tests/: the snapshot script and its fixture


@pytest.mark.slow
def test_behaviour_matches_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "now.json"
    subprocess.run(
        [sys.executable, str(HERE / "behaviour_snapshot.py"), str(out)],
        check=True,
        capture_output=True,
    )
    sys.path.insert(0, str(HERE))
    from behaviour_snapshot import compare

    diffs = compare(
        json.loads((HERE / "fixtures" / "behaviour_snapshot.json").read_text()),
        json.loads(out.read_text()),
    )
    assert not diffs, "\n".join(diffs[:20])
