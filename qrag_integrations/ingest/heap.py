"""Handing freed heap memory back to the operating system between shards (glibc only).

Why ctypes and not a library: glibc's ``malloc_trim`` has no Python binding in the standard
library or in a maintained package; it is one C call with a fixed signature."""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable


@functools.cache
def _glibc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` where the C library is not glibc (macOS, Windows,
    musl) or the function cannot be found."""
    try:
        # "glibc 2.36" under glibc; AttributeError (Windows), ValueError (macOS) or OSError elsewhere
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return None
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols, glibc's among them
    except (AttributeError, ValueError, OSError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Hand the heap memory freed so far back to the operating system (glibc's ``malloc_trim(0)``).

    Why, after every shard: on CPU each forward pass allocates activations sized by the padded
    length of its batch, and ``embed_chunks`` starts every shard again with its longest batch.
    glibc reuses freed heap blocks for these differently sized requests only in part, so its heap
    keeps growing while the bytes in use stay flat, and it returns free memory to the system by
    itself only from the top of the heap. Measured without this call (``benchmarks/README.md``,
    "Peak memory"): the resident memory after each of 24 shards of 500 rows rose from 670 MB to
    952 MB with no data kept; with it, it stayed at 619-621 MB. The peak within a shard still
    rose with it (807 to 890 MB; 1,042 MB without), so this narrows the growth, not removes it.

    Returns:
        Whether memory was handed back (always ``False`` where the C library is not glibc: there
        this does nothing).
    """
    trim = _glibc_malloc_trim()
    return bool(trim(0)) if trim is not None else False
