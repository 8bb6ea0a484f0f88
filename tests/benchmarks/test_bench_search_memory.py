"""The search benchmark measures index memory in a fresh process; that process must start."""

from __future__ import annotations

import argparse

from benchmarks.search.modes import memory_in_child


def test_the_memory_child_runs_and_reports_bytes_per_chunk() -> None:
    args = argparse.Namespace(seed=0, dim=32, device="cpu", threads=1, rotation=None)
    got = memory_in_child(200, args, 0.38)
    assert got["index_nbytes"] == 200 * got["index_nbytes_per_chunk"]
    assert got["index_nbytes_per_chunk"] >= 32 * 4  # at least the float32 embedding
    assert "document_layout" not in got


def test_the_memory_child_measures_document_mode_layouts() -> None:
    rotation = {"position_mode": "document", "rope_theta": 1e8, "rope_max_frequency": 0.17}
    args = argparse.Namespace(seed=0, dim=32, device="cpu", threads=1, rotation=rotation)
    got = memory_in_child(20480, args, 0.38)  # one document of 19 runs >= MIN_MEAN_RUN chunks
    assert got["document_layout"] == "19 runs, no copy"
    assert got["short_documents_layout"] == "rotated copy"
    assert got["short_documents_rotation_seconds"] >= 0
    # the copy is float32 embeddings (128 bytes a chunk here); the runs keep no copy
    assert got["short_documents_copy_rss_per_chunk"] > got["document_copy_rss_per_chunk"] + 64
