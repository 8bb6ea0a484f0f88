"""Child processes of the ingest memory benchmarks: thread settings, machine info, megabytes."""

from __future__ import annotations

from benchmarks.harness import results as harness

#: Thread-count variables set in each child (OpenMP / MKL under torch, rayon under tokenizers).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")


def thread_env(threads: int) -> dict[str, str]:
    """The :data:`THREAD_VARS` settings that give a child process ``threads`` threads."""
    return {var: str(threads) for var in THREAD_VARS}


def child_machine_info(threads: int) -> dict:
    """The results' ``machine`` entry for runs made in child processes with ``threads`` threads."""
    return harness.machine_info(
        threads, "cpu", note="2 cores shared with other jobs", child_env=thread_env(threads)
    )


def mb(n: int) -> float:
    return round(n / 1e6, 1)
