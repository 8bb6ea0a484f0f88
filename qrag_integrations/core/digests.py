"""Digests of saved files: a save records the xxh3-128 digest of each file it writes (and the
sha256 of its own manifest) in its manifest; a load checks them, so a damaged file (one flipped
bit, a truncation, a lost file) is refused by name instead of loading and changing picks.

Digests guard against damage on disk or in transfer, not against someone who edits a folder on
purpose (they can recompute them); :mod:`~qrag_integrations.core.manifests` checks such folders.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import xxhash

from qrag_integrations.core.errors import DamagedFileError

logger = logging.getLogger("qrag_integrations")

DIGESTS_KEY = "digests"
#: How file digests are computed, by the name a manifest records. xxh3-128 (the ``xxhash``
#: package) hashes about 8 GB/s here against about 1 GB/s for sha256, which would add about 15%
#: to the load of a 400K-chunk index (benchmarks/fault_injection/results/verify_cost.json); it
#: detects damage, not deliberate edits, which no digest stored beside the files could.
HASHERS: dict[str, Callable[[], Any]] = {"xxh3_128": xxhash.xxh3_128, "sha256": hashlib.sha256}
ALGORITHM = "xxh3_128"
_BLOCK = 1 << 22
#: What to do about a save without digests, for the warning.
RESAVE = "save it again to add them"
#: Folders found without digests inside :func:`collect_undigested` (per thread and task).
_UNDIGESTED: ContextVar[list[Path] | None] = ContextVar("qrag_undigested", default=None)


def file_digest(file: Path, algorithm: str = ALGORITHM) -> str:
    """Hex digest of a file's bytes, streamed in 4 MiB blocks."""
    digest = HASHERS[algorithm]()
    with open(file, "rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _manifest_sha256(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest's content without its own digest, in a canonical JSON form (so
    the digest depends on the values read, not on the file's indentation)."""
    digests = {k: v for k, v in manifest.get(DIGESTS_KEY, {}).items() if k != "manifest"}
    content = {**manifest, DIGESTS_KEY: digests}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(manifest: dict[str, Any], folder: Path, files: Iterable[str]) -> dict[str, Any]:
    """``manifest`` with a ``"digests"`` entry: the digest of each of ``files`` (paths relative
    to ``folder``, already written) and the sha256 of the manifest itself."""
    recorded = {name: file_digest(folder / name) for name in sorted(files)}
    sealed = {**manifest, DIGESTS_KEY: {"algorithm": ALGORITHM, "files": recorded}}
    sealed[DIGESTS_KEY]["manifest"] = _manifest_sha256(sealed)
    return sealed


def files_under(folder: Path, skip: Iterable[str] = ()) -> list[str]:
    """Relative paths of the regular files under ``folder`` except ``skip`` (top-level names)."""
    skipped = set(skip)
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.relative_to(folder).parts[0] not in skipped
    )


@contextmanager
def collect_undigested() -> Iterator[list[Path]]:
    """Within this block, :func:`verify_files` adds each folder it finds without digests to the
    list yielded instead of warning, so that a load of several folders (a saved retriever: its
    index and model) can warn once with :func:`warn_undigested`. The list is this thread's or
    task's (a context variable); a worker thread adds to it when run in a copy of the context
    (``contextvars.copy_context().run``)."""
    found: list[Path] = []
    token = _UNDIGESTED.set(found)
    try:
        yield found
    finally:
        _UNDIGESTED.reset(token)


def warn_undigested(folder: Path, parts: Sequence[str] = (), fix: str = RESAVE) -> None:
    """Log the one warning of a load of ``folder``, a save without digests (by an older
    version); ``parts``: the names of its files or sub-folders found without them."""
    inside = f" (in {', '.join(parts)})" if parts else ""
    logger.warning(
        "%s was saved without file digests%s by an older version, so damaged files in it cannot "
        "be detected; %s",
        folder,
        inside,
        fix,
    )


def check_manifest(
    manifest: dict[str, Any],
    file: Path,
    fix: str,
    error: type[DamagedFileError] = DamagedFileError,
) -> None:
    """Refuse a manifest whose content differs from what was saved (a manifest without
    digests, from an older version, passes; :func:`verify_files` warns about it).

    Raises:
        error: bad digests entry, or the manifest's own digest differs.
    """
    digests = manifest.get(DIGESTS_KEY)
    if digests is None:
        return
    if (
        not isinstance(digests, dict)
        or digests.get("algorithm") not in HASHERS
        or not isinstance(digests.get("files"), dict)
    ):
        raise error(f"corrupt {file}: its {DIGESTS_KEY!r} entry is damaged; {fix}")
    if digests.get("manifest") != _manifest_sha256(manifest):
        raise error(
            f"corrupt {file}: its content differs from what was saved (its sha256 does not "
            f"match the one it records); {fix}"
        )


def verify_files(
    folder: Path,
    manifest: dict[str, Any],
    manifest_name: str,
    fix: str,
    error: type[DamagedFileError] = DamagedFileError,
) -> None:
    """Check every file ``manifest`` records a digest of (see :func:`seal`); a manifest without
    digests (saved by an older version) passes with one warning, or, inside
    :func:`collect_undigested`, adds ``folder`` to its list.

    Args:
        folder: the saved folder.
        manifest: its manifest, already checked with :func:`check_manifest`.
        manifest_name: the manifest's file name, for messages.
        fix: what the user should do, appended to the message ("rebuild the index").
        error: exception class to raise.

    Raises:
        error: a recorded file is missing or its digest differs, naming the file.
    """
    digests = manifest.get(DIGESTS_KEY)
    if digests is None:
        found = _UNDIGESTED.get()
        if found is None:
            warn_undigested(folder)
        else:
            found.append(folder)
        return
    for name, expected in digests["files"].items():
        file = folder / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            # a manifest from someone else could name any file; only the folder's are read
            raise error(f"corrupt {folder / manifest_name}: it records a file outside {folder}")
        if not file.is_file():
            raise error(f"{file} is missing (recorded in {folder / manifest_name}); {fix}")
        if file_digest(file, digests["algorithm"]) != expected:
            raise error(
                f"corrupt {file}: its digest differs from the one recorded in "
                f"{folder / manifest_name} when it was saved (damaged on disk or in transfer); "
                f"{fix}"
            )
