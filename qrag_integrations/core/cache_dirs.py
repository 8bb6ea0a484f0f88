"""Where qrag-integrations keeps what it derives once and reuses (converted reader models, exported
encoders): one root folder, a subfolder per kind, and the file hash entries are checked with."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CACHE_ENV = "QRAG_CACHE_DIR"
"""Environment variable: the root of qrag-integrations' caches (``readers/``, ``onnx/``, ...), or
``off`` for none."""
CACHE_OFF = "off"
"""The value of :data:`CACHE_ENV` that disables the caches."""


def cache_folder(kind: str, cache_dir: str | os.PathLike[str] | bool | None = None) -> Path | None:
    """The folder of one kind of cache, or ``None`` when caching is off.

    Args:
        kind: the subfolder (``"readers"``, ``"onnx"``).
        cache_dir: a folder (used as is); ``False`` for no cache; ``None`` (or ``True``) for the
            default: ``$QRAG_CACHE_DIR/<kind>`` when that variable is set (``off`` disables the
            cache), else ``$XDG_CACHE_HOME/qrag-integrations/<kind>``, else
            ``~/.cache/qrag-integrations/<kind>``.
    """
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        env = os.environ.get(CACHE_ENV, "").strip()
        if env.lower() == CACHE_OFF:
            return None
        if env:
            return Path(env).expanduser() / kind
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        return (Path(xdg) if xdg else Path.home() / ".cache") / "qrag-integrations" / kind
    return Path(cache_dir).expanduser()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()
