"""How many threads a search runs on: the one rule for torch, ONNX Runtime, OpenVINO, FAISS and
SimSIMD.

A search of ``B`` questions runs on ``threads`` threads where that is set
(:attr:`SearchSettings.threads <qrag_integrations.core.search.SearchSettings.threads>`), else on
one thread below :data:`ONE_THREAD_BELOW` questions and on torch's count
(``torch.get_num_threads()``) from there on. :func:`search_threads` holds that count for the
search: torch's count of the calling thread is set inside and restored after, and the count is
readable (:func:`threads_in_search`) by the ONNX Runtime and OpenVINO encoders, FAISS and SimSIMD
that the search calls.

Why one thread by default: a lone question keeps two threads busy for ~100 ms, and where another
process holds a core each parallel region waits for the slower thread; on the shared 2-core
machine the median query went 135 ms -> 329 ms -> 1.2 s -> ~2 s across runs at torch's 2 threads
(issue 68; ``benchmarks/threads`` measures both, idle and beside a busy process).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Generic, TypeVar

import torch

from qrag_integrations.core.errors import QRAGError

#: Searches of fewer questions than this run on one thread unless ``threads`` is set. For one
#: query's scan on the 2-core machine, two threads were no faster than one on a quiet machine
#: (binary and int8 codes) and 13x / 2x slower with the other core busy (the threads wait for a
#: core); from a handful of queries on, the queries split over threads, which pays.
ONE_THREAD_BELOW = 8

T = TypeVar("T")

_IN_SEARCH: ContextVar[int | None] = ContextVar("qrag_search_threads", default=None)
# torch's count is per OS thread (OpenMP), but torch.set_num_threads also sets the count that
# threads started later begin with (the "seed"); the last search to end puts that back as it was
_LOCK = threading.Lock()
_open = 0  # torch_threads blocks open in any thread
_outside = 0  # the count of the first thread to open one: the seed outside every search
_seed = 0  # the last count torch_threads set


def check_threads(threads: object) -> None:
    """Raise :class:`~qrag_integrations.core.errors.QRAGError` unless ``threads`` is ``None`` or
    an integer >= 1."""
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise QRAGError(f"threads must be None or an integer >= 1, got {threads!r}")


def threads_for(questions: int, threads: int | None = None) -> int:
    """The threads a search of ``questions`` questions runs on: ``threads`` if set, else 1 below
    :data:`ONE_THREAD_BELOW` questions, else ``torch.get_num_threads()``."""
    if threads is not None:
        return threads
    return 1 if questions < ONE_THREAD_BELOW else torch.get_num_threads()


def threads_in_search() -> int | None:
    """The thread count of the search running in this thread (``None`` outside a search)."""
    return _IN_SEARCH.get()


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch on ``threads`` intra-op threads in the calling thread inside the block; its count
    before, and the count new threads start with, are restored after (thread-safe)."""
    global _open, _outside, _seed
    with _LOCK:
        before = torch.get_num_threads()
        if _open == 0:
            _outside = _seed = before
        _open += 1
        if threads != before:
            _set_torch(threads)
    try:
        yield
    finally:
        with _LOCK:
            _open -= 1
            if _open:
                if torch.get_num_threads() != before:
                    _set_torch(before)
            # a thread that first asked for its count inside another search began with that
            # search's count: the last search to end gives it, and the seed, the outside count
            elif torch.get_num_threads() != _outside or _seed != _outside:
                _set_torch(_outside)


def _set_torch(threads: int) -> None:
    global _seed
    torch.set_num_threads(threads)
    _seed = threads


@contextlib.contextmanager
def search_threads(questions: int, threads: int | None = None) -> Iterator[int]:
    """Run a search of ``questions`` questions on :func:`threads_for` threads: torch's count is
    set for the block (:func:`torch_threads`) and readable by :func:`threads_in_search`; yields
    the count."""
    count = threads_for(questions, threads)
    token = _IN_SEARCH.set(count)
    try:
        with torch_threads(count):
            yield count
    finally:
        _IN_SEARCH.reset(token)


def set_process_threads(threads: int | None) -> None:
    """A command-line tool's ``--threads``: torch's count for the whole process (``None``: keep
    torch's), which the encoders outside a search and the FAISS / SimSIMD scans of large batches
    follow; the tool's searches take the same count (``SearchSettings(threads=...)``).

    Raises:
        QRAGError: ``threads`` not ``None`` or an integer >= 1.
    """
    check_threads(threads)
    if threads is not None:
        torch.set_num_threads(threads)


class PerThreadCount(Generic[T]):
    """Objects whose thread count is fixed when they are made (an ONNX Runtime session, an
    OpenVINO compiled model): one per count, made on first use (thread-safe)."""

    def __init__(self, make: Callable[[int], T], threads: int | None = None) -> None:
        """``make(count)`` makes one; ``threads``: the count outside a search (``None``:
        torch's count at each call), whose object is made now (a bad file fails here)."""
        self._make, self.threads = make, threads
        self._made: dict[int, T] = {}
        self._lock = threading.Lock()
        self.get(threads or torch.get_num_threads())

    def get(self, threads: int) -> T:
        """The object of ``threads`` threads."""
        with self._lock:
            if threads not in self._made:
                self._made[threads] = self._make(threads)
            return self._made[threads]

    def for_call(self) -> T:
        """The object of this call's count: the search's (:func:`threads_in_search`), else
        ``threads``, else torch's count."""
        return self.get(threads_in_search() or self.threads or torch.get_num_threads())

    def made(self) -> dict[int, T]:
        """The objects made so far, by count."""
        with self._lock:
            return dict(self._made)


@contextlib.contextmanager
def faiss_threads_for(queries: int) -> Iterator[None]:
    """Run the FAISS calls inside on the search's threads
    (:func:`~qrag_integrations.core.threads.threads_in_search`), outside a search on one OpenMP
    thread when ``queries`` is below :data:`ONE_THREAD_BELOW` (OpenMP's thread count is per
    calling thread; restored after)."""
    import faiss

    threads = threads_in_search()
    if threads is None and queries >= ONE_THREAD_BELOW:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1 if threads is None else threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)
