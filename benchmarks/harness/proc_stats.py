"""Process statistics from ``/proc`` (Linux) for the benchmarks: resident memory and its peak,
and how many cores *other* processes kept busy while something was measured."""

from __future__ import annotations

import os
import time


def rss_bytes() -> int:
    """Resident set size of this process (psutil if installed, else /proc/self/status)."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read RSS")


def peak_rss_bytes() -> int | None:
    """Peak resident set size of this process since it started or :func:`reset_peak_rss`."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset the peak RSS to the current RSS; ``False`` where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class OtherCpu:
    """Average number of cores busy with *other* processes between start() and stop() (Linux)."""

    def __init__(self) -> None:
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    @staticmethod
    def _total_busy() -> int:
        with open("/proc/stat", encoding="ascii") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        return sum(f[:8]) - f[3] - f[4]  # minus idle and iowait

    @staticmethod
    def _self_busy() -> int:
        with open("/proc/self/stat", encoding="ascii") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])  # utime + stime

    def start(self) -> OtherCpu:
        try:
            self._t, self._b, self._s = time.perf_counter(), self._total_busy(), self._self_busy()
        except (OSError, ValueError, IndexError):
            self._t = None
        return self

    def stop(self) -> float | None:
        if self._t is None:
            return None
        try:
            wall = time.perf_counter() - self._t
            other = (self._total_busy() - self._b) - (self._self_busy() - self._s)
        except (OSError, ValueError, IndexError):
            return None
        return max(0.0, other / self.hz / wall)
