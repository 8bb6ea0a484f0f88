"""A cache of GGUF reader models converted once to transformers' own format.

transformers reads a GGUF file by parsing its metadata several times and de-quantising every
tensor, on every load (SmolLM2-135M-Instruct: 28-53 s with one thread on a 2-core CPU shared
with a training job; 6 s of the 28 the tokenizer). :func:`load_gguf_cached` does that once,
writes the dense model (safetensors) and its tokenizer to an entry folder of the cache, and
later loads read that folder instead, without touching the GGUF parser::

    <cache>/<sha256 of the GGUF file>-transformers-<version>-gguf-<version>/
        config.json, generation_config.json, model.safetensors, tokenizer.json, ...
        qrag-reader-cache.json   manifest: the source file's SHA-256, the library versions, and
                                 every file of the entry with its size and SHA-256

An entry is written to a scratch sibling and renamed into place whole
(:func:`qrag_integrations.core.atomic.atomic_dir`), its manifest last, so a killed or concurrent write
never leaves a partial entry at the path a load reads. Each load checks the entry against its
manifest (sizes and SHA-256 of every file) before reading it; a damaged entry is converted again
and replaced. A folder at the entry path without our manifest, or with files the manifest does
not list, is refused with :class:`ReaderError` naming it: it is not ours to replace, and nothing
is ever deleted but an earlier entry of our own.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qrag_integrations.core.atomic import SaveKind, atomic_dir, write_json_atomic
from qrag_integrations.core.cache_dirs import CACHE_ENV, CACHE_OFF, cache_folder, file_sha256
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.llm.base import ReaderError

logger = logging.getLogger(__name__)

MANIFEST_FILE = "qrag-reader-cache.json"
"""The manifest of an entry, written last; an entry without it is not trusted."""

CACHE_FORMAT = "qrag-gguf-reader-cache"
"""The manifest's ``"format"`` value."""

CACHE_VERSION = 1
"""The manifest's ``"version"``: bumped when the entry layout changes (old entries are rebuilt)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def reader_cache_dir(cache_dir: str | os.PathLike[str] | bool | None = None) -> Path | None:
    """The folder of the converted-GGUF cache, or ``None`` when caching is off.

    Args:
        cache_dir: a folder (used as is); ``False`` for no cache; ``None`` (or ``True``) for the
            default: ``$QRAG_CACHE_DIR/readers`` when that variable is set (``off`` disables
            the cache), else ``$XDG_CACHE_HOME/qrag-integrations/readers``, else
            ``~/.cache/qrag-integrations/readers``.
    """
    if cache_dir is not None and not isinstance(cache_dir, bool) and not str(cache_dir).strip():
        raise ReaderError("cache_dir must be a folder, False (no cache) or None (the default)")
    return cache_folder("readers", cache_dir)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@dataclass(frozen=True)
class CacheKey:
    """What a converted model depends on: the GGUF file's bytes and the converting libraries."""

    sha256: str
    """SHA-256 of the GGUF file."""
    size: int
    """Its size in bytes (for the manifest)."""
    versions: dict[str, str]
    """``transformers`` (the conversion) and ``gguf`` (its reader and de-quantisation)."""

    @property
    def folder(self) -> str:
        """The entry's folder name."""
        versions = sorted(self.versions.items())
        return "-".join([self.sha256, *(f"{name}-{_UNSAFE.sub('_', v)}" for name, v in versions)])


def cache_key(gguf_path: str | os.PathLike[str]) -> CacheKey:
    """The key of a GGUF file: its SHA-256 and the versions of transformers and gguf.

    The whole file is hashed on every load (0.1-0.3 s for the 98 MB SmolLM2 file here). A key of
    (path, size, mtime) would skip that, but it can match a different file (one replaced in
    place with its size and mtime kept, e.g. by ``cp -p``, rsync or a package reinstall, or on a
    filesystem with coarse mtimes), and such a hit would silently answer with another model's
    weights: correctness first.
    """
    import transformers

    path = Path(gguf_path)
    return CacheKey(
        sha256=file_sha256(path),
        size=path.stat().st_size,
        versions={"transformers": transformers.__version__, "gguf": _version("gguf")},
    )


def _read_manifest(entry: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((entry / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else None


def _listed_files(manifest: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return None
    for name, info in files.items():
        if (
            not isinstance(name, str)
            or name.startswith("/")
            or ".." in Path(name).parts
            or not isinstance(info, dict)
            or not isinstance(info.get("size"), int)
            or not isinstance(info.get("sha256"), str)
        ):
            return None
    return files


def _entry_kind(entry: Path, manifest: dict[str, Any] | None = None) -> SaveKind:
    """What a write may replace at ``entry``: an earlier entry of ours holding only the files
    its manifest lists (see :meth:`SaveKind.obstacle`); ``manifest``: the entry's, if read."""
    manifest = manifest if manifest is not None else _read_manifest(entry)
    files = _listed_files(manifest) if manifest is not None else None
    names = {name.split("/", 1)[0] for name in files or ()}
    return SaveKind(
        "converted reader model cache",
        frozenset({MANIFEST_FILE, *names}),
        MANIFEST_FILE,
        CACHE_FORMAT,
    )


def entry_problem(entry: Path, key: CacheKey) -> str | None:
    """``None`` if ``entry`` is a complete, intact cache of ``key``; else what is wrong with it
    (``"absent"`` when there is nothing there).

    Raises:
        ReaderError: something is at ``entry`` that this module did not write, or whose
            manifest is unreadable (the message names the path and what to do).
    """
    if not entry.exists() and not entry.is_symlink():
        return "absent"
    manifest = _read_manifest(entry)
    obstacle = _entry_kind(entry, manifest).obstacle(entry)
    if obstacle is not None:
        raise ReaderError(
            f"refusing the reader cache folder {entry}: it is {obstacle}. Something else wrote "
            "there or the entry is damaged, so it is neither read nor replaced. Remove it, or "
            f"choose another cache (cache_dir=..., or {CACHE_ENV}; cache_dir=False or "
            f"{CACHE_ENV}={CACHE_OFF} for none)"
        )
    if manifest is None:
        return "absent"  # an empty folder (obstacle() accepts it): nothing to read
    files = _listed_files(manifest)
    if files is None:
        return f"its {MANIFEST_FILE} lists no files"
    if manifest.get("version") != CACHE_VERSION:
        return f"it has layout version {manifest.get('version')!r}, not {CACHE_VERSION}"
    source = manifest.get("source")
    if not isinstance(source, dict) or source.get("sha256") != key.sha256:
        return "its manifest names another source file"
    if manifest.get("versions") != key.versions:
        return f"it was converted with {manifest.get('versions')}, not {key.versions}"
    for name, info in files.items():
        path = entry / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != info["size"]:
            return f"{name} has {path.stat().st_size} bytes, not {info['size']}"
        # Every file is hashed (0.7-1.3 s for SmolLM2's 540 MB of float32 weights here): a
        # garbled byte in the weights would load without an error and answer wrongly.
        if file_sha256(path) != info["sha256"]:
            return f"{name} does not match its SHA-256"
    return None


class _AlreadyCached(Exception):
    """Another process wrote the same entry while this one was converting."""


def write_entry(
    entry: Path, key: CacheKey, source: Path, tokenizer: Any, model: Any, replace: bool = False
) -> bool:
    """Save a GGUF-loaded ``tokenizer`` and dense ``model`` as the cache entry ``entry`` of
    ``key``; ``True`` if the entry now holds them (written here or by a concurrent process).

    An intact entry that appears at ``entry`` while this one is written (a concurrent process
    converted the same file) is kept, unless ``replace`` (the entry checks out but does not load).

    A failed write (no space, no permission, something in the way) is logged, not raised: the
    model is loaded either way. ``model`` loses its GGUF quantizer record, which only marks it as
    not serializable (its weights are already plain float tensors).
    """
    if not all(p.is_floating_point() for p in model.parameters()):
        logger.info("not caching %s: transformers kept its weights packed", source)
        return False
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    try:
        with atomic_dir(entry, _entry_kind(entry)) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            files = {
                path.relative_to(tmp).as_posix(): {
                    "size": path.stat().st_size,
                    "sha256": file_sha256(path),
                }
                for path in sorted(tmp.rglob("*"))
                if path.is_file()
            }
            if not replace and entry_problem(entry, key) is None:
                raise _AlreadyCached
            write_json_atomic(
                tmp / MANIFEST_FILE,
                {
                    "format": CACHE_FORMAT,
                    "version": CACHE_VERSION,
                    "source": {
                        "name": source.name,
                        "path": str(source),
                        "size": key.size,
                        "sha256": key.sha256,
                    },
                    "versions": key.versions,
                    "files": files,
                },
            )
    except _AlreadyCached:
        logger.info("reader cache %s was written by another process meanwhile; kept it", entry)
        return True
    except (OSError, QRAGError) as exc:
        logger.warning(
            "could not write the reader cache %s (the model is loaded anyway): %s", entry, exc
        )
        return False
    size = sum(info["size"] for info in files.values())
    logger.info("converted %s once and cached it at %s (%.0f MB)", source, entry, size / 1e6)
    return True


def load_gguf_cached(
    source: Path,
    root: Path,
    load_gguf: Callable[[], tuple[Any, Any]],
    load_folder: Callable[[Path], tuple[Any, Any]],
) -> tuple[Any, Any, Path | None]:
    """``(tokenizer, model, entry)`` for the GGUF file ``source``, through the cache ``root``.

    Args:
        source: the GGUF file.
        root: the cache folder (see :func:`reader_cache_dir`).
        load_gguf: loads ``(tokenizer, model)`` from ``source`` (the slow conversion).
        load_folder: loads ``(tokenizer, model)`` from an entry folder (safetensors only).

    Returns:
        The tokenizer, the model and the entry it was read from or written to (``None`` when
        the entry could not be written).

    Raises:
        ReaderError: something that is not a cache entry of ours is at the entry's path.
    """
    key = cache_key(source)
    entry = root / key.folder
    problem = entry_problem(entry, key)
    unloadable = False
    if problem is None:
        try:
            tokenizer, model = load_folder(entry)
            return tokenizer, model, entry
        except Exception as exc:  # noqa: BLE001 - a checked entry that does not load is rebuilt
            problem, unloadable = f"it did not load ({type(exc).__name__}: {exc})", True
    if problem != "absent":
        logger.warning(
            "the reader cache %s is damaged (%s); converting %s again", entry, problem, source
        )
    tokenizer, model = load_gguf()
    written = write_entry(entry, key, source, tokenizer, model, replace=unloadable)
    return tokenizer, model, entry if written else None
