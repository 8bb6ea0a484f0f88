"""Reading saved folders (checkpoints, indexes) that may come from someone else: their JSON
manifests and the headers of their safetensors files, checked before anything is allocated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open

from qrag_integrations.core.digests import check_manifest
from qrag_integrations.core.errors import DamagedFileError, QRAGError


def read_manifest_file(
    folder: Path,
    name: str,
    format_name: str,
    max_version: int,
    what: str,
    error: type[QRAGError] = QRAGError,
    fix: str = "save it again",
    damaged: type[DamagedFileError] = DamagedFileError,
) -> dict[str, Any]:
    """Read ``folder/name`` and check its ``format``, ``format_version`` and own digest.

    Args:
        folder: the saved folder.
        name: manifest file name inside it.
        format_name: expected value of ``"format"``.
        max_version: newest ``format_version`` this library reads.
        what: what the folder should be, for messages ("Q-RAG checkpoint", "saved index").
        error: exception class to raise.
        fix: what to do about a damaged manifest, for its message.
        damaged: exception class for a manifest whose content differs from what was saved.

    Raises:
        error: missing, unreadable, foreign or too new manifest, with the file named.
        damaged: the manifest's recorded digest does not match its content.
    """
    file = folder / name
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise error(f"{folder} is not a {what}: {name} is missing") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"corrupt {file}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != format_name:
        raise error(f"{file} is not a {format_name} manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > max_version:
        raise error(
            f"{file} has format_version {version!r}; this library reads up to {max_version}"
        )
    check_manifest(manifest, file, fix, damaged)
    return manifest


def safetensors_shapes(
    file: Path, error: type[QRAGError] = QRAGError
) -> dict[str, tuple[int, ...]]:
    """Shape of every tensor in a safetensors file, read from its header only (the library
    checks that the header fits the file's size).

    Raises:
        error: the file is missing, not a regular file, or its header is corrupt.
    """
    if not file.is_file():
        raise error(f"{file} is missing or not a regular file")
    try:
        with safe_open(str(file), framework="pt") as fh:
            return {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}  # noqa: SIM118 - not a dict
    except (SafetensorError, OSError) as exc:
        raise error(f"corrupt {file}: {exc}") from exc
