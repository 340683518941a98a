"""glibc's malloc, set for a process that takes megabyte request bodies: keep them on the heap.

glibc serves a block past its mmap threshold (128 KiB, raised as big blocks are freed) with a
fresh ``mmap`` and unmaps it on free, so the next request body faults in every page again. A
512-span OTLP request is about 2 MiB, copied four or five times on its way in (socket, HTTP or
HTTP/2 framing, the joined body): those page faults were a third of ``serve``'s CPU per request
(perf, OTLP/HTTP and gRPC alike), and setting the thresholds halved the transport's cost. Set at
start-up, and only in ``serve``'s own process: the in-process processor never touches its host's
allocator. The environment's own settings (``MALLOC_*`` or ``GLIBC_TUNABLES``) win.

One arena (``M_ARENA_MAX``): glibc gives each new thread an arena of its own (up to eight per
core), and :func:`trim` cannot give back the free top of those (only
``M_TRIM_THRESHOLD`` does, which keeps 64 MiB): a listener thread's arena kept 33-53 MiB of freed
bodies after a burst. CPython allocates under the GIL, so more arenas buy it little concurrency.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

MMAP_THRESHOLD = 16 << 20  # blocks below this come from the heap: the default --max-body-bytes
TRIM_THRESHOLD = 64 << 20  # free heap kept for the next requests before it goes back to the OS
_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX",
                "GLIBC_TUNABLES")


def tune_for_large_bodies() -> str:
    """Set the thresholds and one arena, before any thread starts; what was done, for the start-up
    line: ``"tuned"``, or why not."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return "not glibc"
    if any(name in os.environ for name in _ENVIRONMENT):
        return "set by the environment"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "no mallopt"
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1 or mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1
            or mallopt(_M_ARENA_MAX, 1) != 1):
        return "refused by mallopt"
    return "tuned"


def trim() -> bool:
    """``malloc_trim(0)``: glibc gives back free pages of every heap and arena, not only the top
    of the main heap (which is all ``M_TRIM_THRESHOLD`` does). False where there is no glibc."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes = (ctypes.c_size_t,)
    malloc_trim.restype = ctypes.c_int
    return bool(malloc_trim(0))
