"""One structure built from a tensor on first use and rebuilt when asked for another tensor: the
FAISS, compact-scan and BM25 indexes and the rotated copy the search keeps per snapshot."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")


class BuiltFor:
    """One structure built from a tensor on first use and rebuilt when asked for another tensor
    (thread-safe): the FAISS, compact-scan and BM25 indexes over a snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (weak reference to the tensor it was built from, structure): a weakref cannot be
        # confused with a later tensor the way a reused id() could.
        self._built: tuple[weakref.ref, Any] | None = None

    def get(self, key: torch.Tensor, build: Callable[[], T]) -> T:
        """The structure built for ``key``; ``build()`` makes it when ``key`` is new."""
        with self._lock:
            if self._built is not None and self._built[0]() is key:
                return self._built[1]
            value = build()
            self._built = (weakref.ref(key), value)
            return value
