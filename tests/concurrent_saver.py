"""Save one small retriever to one path many times, in step with another process doing the same.

    python tests/concurrent_saver.py TINY_BERT_DIR TARGET NAME SAVES

Builds a retriever whose chunk ids, texts and ``k`` are its own (``NAME``), writes the file
``TARGET.ready-NAME``, waits for ``TARGET.go`` to appear, then saves to ``TARGET`` ``SAVES`` times.
Every ``os.replace`` sleeps first (a slow file system), which widens the swap of a save from
microseconds to milliseconds so that two unguarded swaps would meet. Used by
``tests/core/test_concurrent_saves.py``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from qrag_integrations import QRAGRetriever

#: ``k`` of each process's retriever: a save with one process's chunks and the other's settings
#: would be a mix.
K_OF = {"A": 2, "B": 3}


def saver_texts(name: str) -> list[str]:
    """The chunk texts of process ``name``."""
    return [f"{name.lower()} mary went to the kitchen {i}" for i in range(4)]


def slow_renames(seconds: float = 0.01) -> None:
    """Make every ``os.replace`` of this process sleep first."""
    replace = os.replace

    def slow(*args: Any, **kwargs: Any) -> None:
        time.sleep(seconds)
        replace(*args, **kwargs)

    os.replace = slow  # type: ignore[assignment]


def main() -> None:
    tiny_bert_dir, target, name, saves = (
        sys.argv[1],
        Path(sys.argv[2]),
        sys.argv[3],
        int(sys.argv[4]),
    )
    torch.set_num_threads(1)
    texts = saver_texts(name)
    retriever = QRAGRetriever.from_texts(
        texts, ids=[f"{name}{i}" for i in range(len(texts))], checkpoint=tiny_bert_dir, k=K_OF[name]
    )
    target.with_name(f"{target.name}.ready-{name}").touch()
    go = target.with_name(f"{target.name}.go")
    deadline = time.monotonic() + 120
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.01)
    slow_renames()
    for _ in range(saves):
        retriever.save(target)


if __name__ == "__main__":
    main()
