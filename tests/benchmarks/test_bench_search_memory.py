"""The search benchmark measures index memory in a fresh process; that process must start."""

from __future__ import annotations

import argparse

from benchmarks.search.modes import memory_in_child


def test_the_memory_child_runs_and_reports_bytes_per_chunk() -> None:
    args = argparse.Namespace(seed=0, dim=32, device="cpu", threads=1)
    got = memory_in_child(200, args, 0.38)
    assert got["index_nbytes"] == 200 * got["index_nbytes_per_chunk"]
    assert got["index_nbytes_per_chunk"] >= 32 * 4  # at least the float32 embedding
