"""Safe saves: a folder appears complete or not at all, and replaces only an earlier save of its
own kind, never files we did not write.

Every saver (checkpoints, indexes, retrievers, the trainer's run folders) describes what it
writes with a :class:`SaveKind` and writes through :func:`atomic_dir`, so the question "may this
save replace what is at the path?" is answered in one place, :meth:`SaveKind.obstacle`.

Saves to one path from several threads or processes are serialised at the swap by a lock: a
thread lock and a file lock on the hidden sibling ``.<name>.lock`` (:func:`lock_path`), which
stays next to the target (removing a lock file while another process waits on it would break
the lock). Each save writes its own scratch folder, so the last one to swap wins, whole.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from qrag_integrations.core.errors import QRAGError

logger = logging.getLogger("qrag_integrations")


def _default_file_mode() -> int:
    # os.umask can only be read by setting it; done once, at import.
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


#: Mode of files in folders written by :func:`atomic_dir` (some writers, e.g. safetensors,
#: create 0600 files; saved checkpoints and indexes should be readable like any other file).
FILE_MODE = _default_file_mode()

#: Scratch siblings :func:`atomic_dir` makes next to a target ``name``: ``.name.tmp-<8 hex>``
#: (being written) and ``.name.old-<8 hex>`` (the previous save, during the swap).
_SCRATCH = re.compile(r"^\.(?P<name>.+)\.(?P<stage>tmp|old)-[0-9a-f]{8}$")
#: The lock file :func:`atomic_dir` keeps next to a target ``name``: ``.name.lock``.
_LOCK_FILE = re.compile(r"^\.(?P<name>.+)\.lock$")
#: Seconds a save waits for other processes' swaps of the same target before giving up.
LOCK_TIMEOUT_S = 600.0

# Held while checking a target and swapping a new save in, so that two threads saving to one
# path never interleave their renames (the writing itself runs outside it).
_SWAP_LOCK = threading.Lock()


@dataclass(frozen=True)
class SaveKind:
    """A kind of saved folder, and how to recognise an earlier save of it that a new one may
    replace."""

    what: str
    """What the folder is, for messages (``"Q-RAG checkpoint"``)."""
    entries: frozenset[str]
    """Names a save of this kind may hold at its top level; any other name is someone else's."""
    manifest: str | None = None
    """Its JSON manifest file (``None``: a folder recognised by its entries alone)."""
    format: str | None = None
    """The manifest's ``"format"`` value."""

    def obstacle(self, target: Path) -> str | None:
        """What keeps a save of this kind from replacing ``target``, or ``None`` if it may (the
        path is missing, an empty folder, or an earlier save of this kind holding only what such
        a save writes)."""
        if target.is_symlink():
            return "a symbolic link"
        if not target.exists():
            return None
        if not target.is_dir():
            return f"a file ({target.stat().st_size} bytes)" if target.is_file() else "not a folder"
        present = sorted(target.iterdir())
        if not present:
            return None
        foreign = [p for p in present if not self._writes(p.name)]
        no_manifest = (
            self.manifest is not None and _manifest_format(target / self.manifest) != self.format
        )
        if no_manifest or len(foreign) == len(present):
            why = f" (no {self.manifest})" if no_manifest else ""
            return f"a folder that is not a {self.what}{why}; it holds {_listing(present)}"
        if foreign:
            return f"a {self.what} that also holds files it does not write: {_listing(foreign)}"
        return None

    def _writes(self, name: str) -> bool:
        own = _SCRATCH.match(name) or _LOCK_FILE.match(name)
        return name in self.entries or (own is not None and own["name"] in self.entries)


def _manifest_format(file: Path) -> Any:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("format") if isinstance(data, dict) else None


def _listing(paths: list[Path], most: int = 5) -> str:
    names = [p.name + ("/" if p.is_dir() else "") for p in paths]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def check_save_target(target: str | os.PathLike[str], kind: SaveKind) -> None:
    """Raise :class:`QRAGError` naming ``target`` and what is in the way if a save of ``kind``
    may not replace it (see :meth:`SaveKind.obstacle`)."""
    target = Path(target)
    obstacle = kind.obstacle(target)
    if obstacle is not None:
        raise QRAGError(
            f"refusing to save a {kind.what} to {target}: it is {obstacle}. Choose another path, "
            "or pass overwrite=True to move it aside to a new sibling folder (nothing is deleted)"
        )


def move_aside(target: str | os.PathLike[str]) -> Path:
    """Rename ``target`` (a file or folder) to a new sibling ``<name>.old-<YYYYmmdd-HHMMSS>``,
    log where, and return that path. Nothing is deleted."""
    target = Path(os.path.abspath(target))
    if target.parent == target or Path.cwd().is_relative_to(target):
        raise QRAGError(
            f"will not move {target} aside: it is the root or holds the working directory"
        )
    stem = f"{target.name}.old-{time.strftime('%Y%m%d-%H%M%S')}"
    aside, n = target.with_name(stem), 1
    while aside.exists() or aside.is_symlink():
        n += 1
        aside = target.with_name(f"{stem}-{n}")
    os.rename(target, aside)
    logger.warning("moved %s aside to %s (overwrite=True; nothing was deleted)", target, aside)
    return aside


def lock_path(target: str | os.PathLike[str]) -> Path:
    """The lock file of saves to ``target``: its hidden sibling ``.<name>.lock``."""
    target = Path(os.path.abspath(target))
    return target.parent / f".{target.name}.lock"


@contextlib.contextmanager
def _swap_lock(target: Path) -> Iterator[None]:
    """Hold the lock of saves to ``target`` (see :func:`lock_path`): other processes' swaps wait
    on the file lock, this process's threads on a thread lock. A target inside another save's
    scratch folder (an index written into a retriever's save) needs no file lock: no one else
    can see that folder.

    Raises:
        QRAGError: another process held the lock for :data:`LOCK_TIMEOUT_S` seconds.
    """
    scratch = _SCRATCH.match(target.parent.name)
    if scratch is not None and scratch["stage"] == "tmp":
        with _SWAP_LOCK:
            yield
        return
    lock = FileLock(str(lock_path(target)), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout as exc:
        raise QRAGError(
            f"cannot save to {target}: another process has held its lock {lock_path(target)} for "
            f"{LOCK_TIMEOUT_S:g} s"
        ) from exc
    try:
        with _SWAP_LOCK:
            yield
    finally:
        lock.release()


@contextlib.contextmanager
def atomic_dir(
    target: str | os.PathLike[str], kind: SaveKind, overwrite: bool = False
) -> Iterator[Path]:
    """Yield a scratch folder next to ``target``; on success it replaces ``target`` in one rename.

    Args:
        target: the folder to write.
        kind: what is written; ``target`` may be missing, an empty folder or an earlier save of
            this kind, which the new save replaces whole.
        overwrite: anything else at ``target`` is moved aside with :func:`move_aside` instead
            of refusing.

    Raises:
        QRAGError: something else is at ``target`` and ``overwrite`` is false (checked before
            the body runs, and again just before the swap).

    If the body or the swap fails, the scratch folder is removed and ``target`` is left as it was.
    The swap holds :func:`_swap_lock`: saves to one path from several processes or threads swap
    one at a time, each replacing the previous complete save.
    """
    target = Path(os.path.abspath(target))
    if not overwrite:
        check_save_target(target, kind)  # fail before the costly writing
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise QRAGError(f"cannot save to {target}: a parent of it is a file ({exc})") from exc
    tag = uuid.uuid4().hex[:8]
    tmp = target.parent / f".{target.name}.tmp-{tag}"
    tmp.mkdir()
    old = target.parent / f".{target.name}.old-{tag}"
    try:
        yield tmp
        for file in tmp.rglob("*"):
            if file.is_file():
                file.chmod(FILE_MODE)
        with _swap_lock(target):
            if overwrite and kind.obstacle(target) is not None:
                move_aside(target)
            check_save_target(target, kind)  # the path may have changed while we wrote
            replacing = target.exists()
            if replacing:
                os.replace(target, old)
            try:
                os.replace(tmp, target)
            except BaseException:
                if replacing:
                    os.replace(old, target)
                raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def recover_interrupted_save(target: str | os.PathLike[str], kind: SaveKind) -> None:
    """Repair what a process killed during :func:`atomic_dir` left next to ``target``.

    If ``target`` is missing but the previous save sits in a ``.name.old-*`` scratch folder (the
    kill came between the two renames of the swap), it is renamed back; the remaining scratch
    folders of ``target`` are removed. Call it only where no other process may be saving to
    ``target`` (the trainer does, on the run folder it owns).
    """
    target = Path(os.path.abspath(target))
    if not target.parent.is_dir():
        return
    with _SWAP_LOCK:
        scratch = [
            p
            for p in target.parent.iterdir()
            if (m := _SCRATCH.match(p.name)) is not None and m["name"] == target.name
        ]
        if not target.exists() and not target.is_symlink():
            previous = [
                p
                for p in scratch
                if _SCRATCH.match(p.name)["stage"] == "old"
                and kind.manifest is not None
                and _manifest_format(p / kind.manifest) == kind.format
            ]
            if previous:
                newest = max(previous, key=lambda p: p.stat().st_mtime)
                os.replace(newest, target)
                scratch.remove(newest)
                logger.warning("restored %s from %s (a save of it was interrupted)", target, newest)
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a file through a temporary file beside it and ``os.replace``: readers see the old
    file or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write a UTF-8 text file atomically (:func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically (indented, UTF-8)."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
