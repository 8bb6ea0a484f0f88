"""Atomic writes: a file or folder appears complete or not at all."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _default_file_mode() -> int:
    # os.umask can only be read by setting it; done once, at import.
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


#: Mode of files in folders written by :func:`atomic_dir` (some writers, e.g. safetensors,
#: create 0600 files; saved checkpoints and indexes should be readable like any other file).
FILE_MODE = _default_file_mode()


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a scratch folder next to ``target``; on success it replaces ``target`` in one rename.

    If the body raises, the scratch folder is removed and ``target`` is left as it was.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = target.parent / f".{target.name}.tmp-{tag}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for file in tmp.rglob("*"):
        if file.is_file():
            file.chmod(FILE_MODE)
    old = target.parent / f".{target.name}.old-{tag}"
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write a text file through a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically (indented, UTF-8)."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
