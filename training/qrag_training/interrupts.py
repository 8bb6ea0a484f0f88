"""Ctrl-C and SIGTERM stop a training run at a safe point instead of killing it.

The trainer runs its loop inside :meth:`StopRequests.deferred`: a first SIGINT or SIGTERM there
only records the request, the update or checkpoint save under way finishes, and the loop then
saves ``out_dir/last`` and raises :class:`Interrupted`, whose message is the one line
``qrag-train`` prints before it exits with status 128 + the signal's number. Work that may be
dropped (an evaluation, the end-of-run report) runs inside :meth:`StopRequests.abortable`, where a
signal raises at once. A second signal always raises at once (the atomic saves keep the last
completed checkpoint whole).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Self

#: The signals that ask a run to stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``, ..."""
    return signal.Signals(signum).name


class Interrupted(BaseException):
    """A stop signal ended the work; ``str()`` is the line the command prints. Like
    ``KeyboardInterrupt`` it is no ``Exception``, so no ``except Exception`` on the way swallows
    it."""

    def __init__(self, signum: int, message: str = "", again: bool = False) -> None:
        super().__init__(message or f"interrupted ({signal_name(signum)})")
        self.signum = signum
        """The signal's number."""
        self.again = again
        """A second signal, which does not wait for the work under way."""

    @property
    def exit_status(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + self.signum


class StopRequests:
    """SIGINT / SIGTERM as a stop request the training loop polls (:attr:`requested`).

    ``with stops:`` installs the handlers (in the main thread only: signals reach no other) and
    restores the previous ones at the end; it may be entered again inside itself. Outside
    :meth:`deferred`, or inside :meth:`abortable`, a signal raises :class:`Interrupted` at once.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        """The first stop signal received, if any."""
        self._deferring = 0
        self._depth = 0
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether a stop signal has arrived."""
        return self.signum is not None

    def __enter__(self) -> Self:
        if self._depth == 0 and threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        self._depth += 1
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        again = self.signum is not None
        if not again:
            self.signum = signum
        if again:
            raise Interrupted(
                signum,
                f"interrupted again ({signal_name(signum)}): stopped without waiting; the last "
                "checkpoint save that completed is kept",
                again=True,
            )
        if not self._deferring:
            raise Interrupted(signum)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A first signal inside the block is only recorded (:attr:`requested`)."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1

    @contextlib.contextmanager
    def abortable(self) -> Iterator[None]:
        """Work inside the block may be dropped: a signal (or one already received) raises
        :class:`Interrupted`, even inside :meth:`deferred`."""
        saved, self._deferring = self._deferring, 0
        try:
            if self.signum is not None:
                raise Interrupted(self.signum)
            yield
        finally:
            self._deferring = saved
