"""atomic_dir: complete-or-nothing folders with normal file permissions, that replace only an
earlier save of their own kind."""

from __future__ import annotations

import os

import pytest

from qrag_integrations.core.atomic import (
    FILE_MODE,
    SaveKind,
    atomic_dir,
    recover_interrupted_save,
    write_bytes_atomic,
)
from qrag_integrations.core.errors import QRAGError

KIND = SaveKind(
    "test save", frozenset({"manifest.json", "a.txt", "weights.bin"}), "manifest.json", "test"
)


def write_save(folder, text: str) -> None:
    (folder / "manifest.json").write_text('{"format": "test"}')
    (folder / "a.txt").write_text(text)


def test_files_get_the_default_mode_even_if_written_0600(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target, KIND) as tmp:
        secret = tmp / "weights.bin"
        secret.write_bytes(b"x")
        secret.chmod(0o600)  # what safetensors.save_file does
    assert os.stat(target / "weights.bin").st_mode & 0o777 == FILE_MODE
    assert FILE_MODE & 0o044  # group/others may read under the usual umask


def test_failure_leaves_previous_folder_and_no_scratch(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target, KIND) as tmp:
        write_save(tmp, "old")
    with pytest.raises(RuntimeError), atomic_dir(target, KIND) as tmp:
        write_save(tmp, "new")
        raise RuntimeError("disk full")
    assert (target / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".out.lock",
        "out",
    ]  # the lock stays (see atomic.py)


def test_an_earlier_save_and_an_empty_folder_are_replaced(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    for text in ("first", "second"):
        with atomic_dir(target, KIND) as tmp:
            write_save(tmp, text)
        assert (target / "a.txt").read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.lock", "out"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda t: t.write_text("mine"), r"a file \(4 bytes\)"),
        (
            lambda t: (t.mkdir(), (t / "thesis.txt").write_text("mine")),
            r"a folder that is not a test save \(no manifest.json\); it holds thesis.txt",
        ),
        (
            lambda t: (t.mkdir(), write_save(t, "x"), (t / "notes").mkdir()),
            r"a test save that also holds files it does not write: notes/",
        ),
    ],
    ids=["file", "foreign-folder", "save-with-extra-entry"],
)
def test_anything_else_is_refused_before_the_body_runs(tmp_path, setup, message):
    target = tmp_path / "out"
    setup(target)
    ran = []
    pattern = rf"refusing to save a test save to .*out: it is {message}\."
    with pytest.raises(QRAGError, match=pattern), atomic_dir(target, KIND):
        ran.append(True)
    assert not ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_overwrite_moves_what_is_in_the_way_aside(tmp_path, caplog):
    target = tmp_path / "out"
    target.mkdir()
    (target / "thesis.txt").write_text("mine")
    with atomic_dir(target, KIND, overwrite=True) as tmp:
        write_save(tmp, "new")
    assert (target / "a.txt").read_text() == "new"
    (aside,) = [p for p in tmp_path.iterdir() if p.name not in ("out", ".out.lock")]
    assert aside.name.startswith("out.old-") and (aside / "thesis.txt").read_text() == "mine"
    assert str(aside) in caplog.text


def test_a_file_parent_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with (
        pytest.raises(QRAGError, match="a parent of it is a file"),
        atomic_dir(tmp_path / "f" / "out", KIND),
    ):
        pass
    assert (tmp_path / "f").read_text() == "x"


def test_recover_puts_back_the_previous_save_of_an_interrupted_swap(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target, KIND) as tmp:
        write_save(tmp, "old")
    # as if killed between the swap's two renames, with a scratch folder left behind
    os.rename(target, tmp_path / ".out.old-0123abcd")
    (tmp_path / ".out.tmp-0123abcd").mkdir()
    (tmp_path / ".other.tmp-0123abcd").mkdir()  # another target's scratch is not touched
    recover_interrupted_save(target, KIND)
    assert (target / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.tmp-0123abcd", ".out.lock", "out"]


def test_a_failed_file_write_keeps_the_old_file_and_no_scratch(tmp_path, monkeypatch):
    target = tmp_path / "plot.png"
    write_bytes_atomic(target, b"old")
    real_replace = os.replace

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_bytes_atomic(target, b"new")
    monkeypatch.setattr(os, "replace", real_replace)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["plot.png"]
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new"
