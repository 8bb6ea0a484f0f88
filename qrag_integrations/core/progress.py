"""Progress of long passes (embedding a build or an add, ingesting, adopting) wherever they run:
a tqdm bar on a terminal or in a notebook, else (a log file, a CI job) a line every few seconds,
through the ``qrag_integrations`` logger when logging is configured, else on stderr."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, Self

from tqdm.auto import tqdm

logger = logging.getLogger("qrag_integrations")

#: Seconds between two progress lines where no bar can be drawn.
LOG_EVERY_S = 5.0


class Progress(Protocol):
    """What the passes use of a progress bar (tqdm's names)."""

    n: int

    def update(self, n: int = 1) -> Any: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...


class LogProgress:
    """Progress as lines (``embedding chunks: 512/2000 chunks (26%) in 12 s, about 35 s left``),
    one every :data:`LOG_EVERY_S` seconds and a last one at the end if any was written; a pass
    shorter than that writes nothing."""

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str = "chunk",
        every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.n, self.total, self.desc, self.unit = 0, total, desc, unit
        self.every_s = LOG_EVERY_S if every_s is None else every_s
        self._clock = clock
        self._start = self._last = clock()
        self._written = False

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; write a line if :attr:`every_s` passed since the last one."""
        self.n += n
        now = self._clock()
        if now - self._last >= self.every_s:
            self._last = now
            self._write(now)

    def close(self) -> None:
        """Write the last line (only if an earlier one was written)."""
        if self._written:
            self._write(self._clock(), last=True)
            self._written = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, now: float, last: bool = False) -> None:
        elapsed = now - self._start
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        rate = self.n / elapsed if elapsed > 0 else 0.0
        left = (
            f", about {(self.total - self.n) / rate:.0f} s left"
            if rate > 0 and not last and self.total > self.n
            else ""
        )
        line = f"{self.desc}: {self.n}/{self.total} {self.unit}s{share} in {elapsed:.0f} s{left}"
        if logger.hasHandlers():
            logger.info(line)
        else:  # no logging set up: Python would drop an INFO line
            print(line, file=sys.stderr, flush=True)
        self._written = True


def _drawable() -> bool:
    """Whether a bar can be drawn: stderr is a terminal, or this runs in a Jupyter kernel."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def progress_bar(total: int, desc: str, unit: str = "chunk", show: bool = True) -> Progress:
    """A progress bar for ``total`` items: tqdm where it can be drawn, :class:`LogProgress`
    elsewhere, nothing when ``show`` is false."""
    if not show:
        return tqdm(total=total, disable=True)
    if _drawable():
        return tqdm(total=total, desc=desc, unit=unit)
    return LogProgress(total, desc, unit)
