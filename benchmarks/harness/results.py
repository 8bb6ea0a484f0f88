"""The header every benchmark result carries: machine, threads, code version, the command line;
and the JSON writer."""

from __future__ import annotations

import functools
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from qrag_integrations.core.atomic import write_text_atomic


def set_threads(threads: int) -> None:
    """Thread count for both torch and FAISS (OpenMP); also pins :func:`code_version` to the
    commit checked out now, at the start of a run (a commit made while it runs is not its code)."""
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    code_version()


def code_version() -> dict:
    """Commit of the checkout when first asked in this process (runs ask at their start:
    :func:`set_threads`) and where ``qrag_integrations`` was imported from."""
    return dict(_code_version_at_first_call())


@functools.cache
def _code_version_at_first_call() -> dict:
    import qrag_integrations

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"git_commit": commit, "qrag_integrations": str(Path(qrag_integrations.__file__).parent)}


def command_line(argv: list[str] | None) -> str:
    """The command that produced a result file (``argv`` as given to ``main``, else sys.argv):
    ``python -m benchmarks.<folder>.<script> ...`` when run as a module, quoted for a shell (files
    written before commit b2054cb, 2026-11-29, joined the words unquoted: an empty argument shows
    as a double space)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = ["-m", spec.name] if spec is not None and spec.name else [sys.argv[0]]
    return shlex.join(["python", *program, *(argv if argv is not None else sys.argv[1:])])


def command_words(command: str) -> list[str]:
    """The words of a :func:`command_line`: shell-quoted since commit b2054cb (2026-11-29);
    joined with single spaces before (an empty argument, such as ``--ruler ''``, shows there as a double space)."""
    if any(quote in command for quote in "'\""):
        return shlex.split(command)
    return command.split(" ")


def flag_value(words: Sequence[str], flag: str) -> str | None:
    """The word after ``flag`` in a command's words (:func:`command_words`), or ``None``."""
    return words[words.index(flag) + 1] if flag in words[:-1] else None


def machine_info(threads: int, device: str, **extra) -> dict:
    """Platform, CPU count, threads, device and torch version, then ``extra`` in order."""
    import torch

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "device": device,
        "torch": torch.__version__,
        **extra,
    }


def write_json(path: str | Path, obj: dict) -> None:
    """Write a result file atomically: an interrupted run leaves the earlier file whole."""
    write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


def provenance(argv: Sequence[str] | None, threads: int, device: str = "cpu") -> dict:
    """The head of a result file: the command, the code version and the machine."""
    return {
        "command": command_line(list(argv) if argv is not None else None),
        "code": code_version(),
        "machine": machine_info(threads, device),
    }
