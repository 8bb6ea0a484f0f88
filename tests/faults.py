"""Fault injection: make the n-th file write under a folder fail, or kill the process there.

A "file write" is what Python's audit hooks report (``open`` for writing, ``os.mkdir``, the
renames of ``os.rename`` / ``os.replace``; with ``removals`` also ``os.remove`` / ``os.rmdir``)
plus the safetensors writers, which write from native code that no audit event sees and are
wrapped where our modules and transformers import them. The tokenizers library also writes
``tokenizer.json`` natively; that one write is not an injection point (its neighbours are).

Importable as ``faults`` from any test (``tests/`` is on ``sys.path``, see ``retriever_corpus``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

#: ``(module, name)`` of the native writers the saves use.
NATIVE_WRITERS = (
    ("qrag_integrations.core.checkpoint", "save_file"),
    ("qrag_integrations.core.index_files", "save_file"),
    ("qrag_training.run_folder", "save_file"),
    ("transformers.modeling_utils", "safe_save_file"),
)


class InjectedFault(OSError):
    """The failure a :class:`Faults` plan raises (an ``OSError``, like a full disk)."""


def raise_fault(what: str) -> None:
    """Default action: fail the write."""
    raise InjectedFault(f"injected failure at {what}")


def kill_self(what: str) -> None:
    """Action for crash tests: SIGKILL this process, as a power cut or the OOM killer would."""
    os.kill(os.getpid(), signal.SIGKILL)


class Faults:
    """Counts the file writes under ``root`` and runs ``action`` at write number ``fail_at``."""

    def __init__(
        self,
        root: Path,
        fail_at: int | None = None,
        action: Callable[[str], None] = raise_fault,
        removals: bool = False,
    ) -> None:
        self.root = os.path.abspath(root)
        self.fail_at = fail_at
        self.action = action
        self.events = {"open", "os.mkdir", "os.rename"} | (
            {"os.remove", "os.rmdir"} if removals else set()
        )
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def write(self, what: str, path: Any) -> None:
        """Record one write of ``path``; at write ``fail_at``, run the action."""
        if not os.path.abspath(os.fsdecode(path)).startswith(self.root):
            return
        with self._lock:
            self.seen.append(f"{what} {path}")
            due = len(self.seen) == self.fail_at
        if due:
            self.action(f"write {self.fail_at} ({what} {path})")

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in self.events or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        if event == "open" and not (args[2] & _WRITE_FLAGS):
            return
        if event == "os.mkdir" and os.path.isdir(args[0]):
            return  # mkdir(exist_ok=True) of a folder that is there: no write
        self.write(event, args[0])


_active: Faults | None = None


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    faults = _active
    if faults is not None:
        faults.audit(event, args)


sys.addaudithook(_audit_hook)  # audit hooks cannot be removed; inert while no plan is active


@contextlib.contextmanager
def injected(faults: Faults) -> Iterator[Faults]:
    """Run the body with ``faults`` watching every file write."""
    global _active
    originals = []
    for module_name, name in NATIVE_WRITERS:
        module = importlib.import_module(module_name)
        original = getattr(module, name)

        def wrapper(
            tensors: Any, filename: Any, *args: Any, _original: Any = original, **kwargs: Any
        ) -> Any:
            faults.write("safetensors", filename)
            return _original(tensors, filename, *args, **kwargs)

        originals.append((module, name, original))
        setattr(module, name, wrapper)
    _active = faults
    try:
        yield faults
    finally:
        _active = None
        for module, name, original in originals:
            setattr(module, name, original)


def scratch_left(folder: Path) -> list[str]:
    """Names of scratch folders ``atomic_dir`` left in ``folder`` (``.x.tmp-*``, ``.x.old-*``)."""
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }
