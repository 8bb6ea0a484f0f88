"""atomic_dir: complete-or-nothing folders with normal file permissions."""

from __future__ import annotations

import os

import pytest

from qrag_integrations.atomic import FILE_MODE, atomic_dir


def test_files_get_the_default_mode_even_if_written_0600(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        secret = tmp / "weights.bin"
        secret.write_bytes(b"x")
        secret.chmod(0o600)  # what safetensors.save_file does
    assert os.stat(target / "weights.bin").st_mode & 0o777 == FILE_MODE
    assert FILE_MODE & 0o044  # group/others may read under the usual umask


def test_failure_leaves_previous_folder_and_no_scratch(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("new")
        raise RuntimeError("disk full")
    assert (target / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
