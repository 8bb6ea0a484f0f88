"""Digests of saved files: a save records the sha256 of each file it writes (and of its own
manifest) in its manifest; a load checks them, so a damaged file (one flipped bit, a truncation,
a lost file) is refused by name instead of loading and changing picks.

Digests guard against damage on disk or in transfer, not against someone who edits a folder on
purpose (they can recompute them); :mod:`~qrag_integrations.core.manifests` checks such folders.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from qrag_integrations.core.errors import DamagedFileError

logger = logging.getLogger("qrag_integrations")

DIGESTS_KEY = "digests"
ALGORITHM = "sha256"


def file_sha256(file: Path) -> str:
    """Hex sha256 of a file's bytes, streamed (``hashlib.file_digest`` releases the GIL)."""
    with open(file, "rb") as fh:
        return hashlib.file_digest(fh, ALGORITHM).hexdigest()


def _manifest_sha256(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest's content without its own digest, in a canonical JSON form (so
    the digest depends on the values read, not on the file's indentation)."""
    digests = {k: v for k, v in manifest.get(DIGESTS_KEY, {}).items() if k != "manifest"}
    content = {**manifest, DIGESTS_KEY: digests}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(manifest: dict[str, Any], folder: Path, files: Iterable[str]) -> dict[str, Any]:
    """``manifest`` with a ``"digests"`` entry: the sha256 of each of ``files`` (paths relative
    to ``folder``, already written) and of the manifest itself."""
    recorded = {name: file_sha256(folder / name) for name in sorted(files)}
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
        or digests.get("algorithm") != ALGORITHM
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
    digests (saved by an older version) logs one warning and passes.

    Args:
        folder: the saved folder.
        manifest: its manifest, already checked with :func:`check_manifest`.
        manifest_name: the manifest's file name, for messages.
        fix: what the user should do, appended to the message ("rebuild the index").
        error: exception class to raise.

    Raises:
        error: a recorded file is missing or its sha256 differs, naming the file.
    """
    digests = manifest.get(DIGESTS_KEY)
    if digests is None:
        logger.warning(
            "%s was saved without file digests (by an older version), so damaged files in it "
            "cannot be detected; save it again to add them",
            folder,
        )
        return
    for name, expected in digests["files"].items():
        file = folder / name
        if not file.is_file():
            raise error(f"{file} is missing (recorded in {folder / manifest_name}); {fix}")
        if file_sha256(file) != expected:
            raise error(
                f"corrupt {file}: its sha256 differs from the one recorded in "
                f"{folder / manifest_name} when it was saved (damaged on disk or in transfer); "
                f"{fix}"
            )
