"""The scripts in examples/ run offline and print what their docstrings promise (slow: each loads
MiniLM in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("name", ["langchain_chain.py", "llama_index_query_engine.py"])
def test_framework_examples_run(name: str) -> None:
    assert run_example(name).strip()


def test_qdrant_example_searches_the_collection_in_place() -> None:
    out = run_example("qdrant_store.py")
    assert "step 3" in out
    assert "Mary travelled to the kitchen." in out  # the second hop, found through the store
    assert "exact_in_candidates=3" in out


def test_framework_stores_example_finds_both_hops_in_place_and_adopted() -> None:
    in_place, adopted = run_example("framework_stores.py").split("adopted:")
    for part in (in_place, adopted):  # a LangChain-filled store, a store of another model
        assert "Mary left the apple." in part and "Mary travelled to the kitchen." in part
