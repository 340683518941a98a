"""One memory budget in bytes for ``serve`` (``--memory-limit-mib``), as the Collector's
``memory_limiter`` does it: request bodies being read and decoded, batches in the ingest queue and
spans held while their traces complete are counted against one limit.

- A request that would take the total past the limit is refused before its body is read (HTTP
  429 + ``Retry-After``, gRPC ``RESOURCE_EXHAUSTED`` + ``RetryInfo``), counted in
  ``agenteval_receiver_requests_total{result="memory_limited"}``; the client retries.
- A body is reserved at twice its size (the bytes, and what they decode into) until its spans are
  queued; from then on its spans count what they take: :func:`span_bytes`.
- Held spans may take at most :data:`HELD_SHARE` of the limit: past it the trace held the longest
  is played at once, its open runs finishing as ``incomplete``
  (``agenteval_receiver_traces_total{reason="memory"}``), so held traces never shut intake out.
  Pieces of runs held by the engine after their trace is played (engine/fragments/) count in
  that share at what their trace was counted at; when they take more of it than the held traces,
  the scope holding the oldest piece is played as it came instead
  (``agenteval_fragments_unstitched_total{reason="memory"}``).

Spans count the bytes they came in (protobuf: what their strings take once decoded) plus
:data:`SPAN_OVERHEAD` for the objects around them (measured: ~750 bytes a span decoded, with
tracemalloc). The process's own baseline (interpreter, modules, the engine's bounded state) is
not in the budget: RSS stays under the limit plus that baseline plus the allocator's slack
(benchmarks/memory_budget.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from .malloc import trim

MIB = 1 << 20
SPAN_OVERHEAD = 1024  # bytes a decoded span takes beyond its wire bytes (measured ~750)
DECODED_RATIO = 1  # a body is reserved at (1 + this) times its size while it is read and decoded
HELD_SHARE = 0.5  # held spans may take this share of the limit; past it the oldest trace is played
CGROUP_SHARE = 0.5  # default limit: this share of the container's memory limit ...
RAM_SHARE = 0.25  # ... or, with none, of the machine's RAM
MIN_LIMIT_MIB = 32
TRIM_STEP = 8 * MIB  # a fall in use past this (and below half the peak) trims the allocator
SETTLE_S = 1.0  # ... once it has lasted this long


def cgroup_limit() -> int | None:
    """The container's memory limit in bytes (cgroup v2, then v1), or None when there is none."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # v1 says "no limit" with a huge number
            return int(text)
    return None


def default_limit_mib() -> int:
    """Half the cgroup limit when there is one, else a quarter of RAM (at least 32 MiB)."""
    limit = cgroup_limit()
    if limit is not None:
        return max(MIN_LIMIT_MIB, int(limit * CGROUP_SHARE) // MIB)
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1024
    return max(MIN_LIMIT_MIB, int(ram * RAM_SHARE) // MIB)


def span_bytes(body_bytes: int, spans: int) -> int:
    """What ``spans`` decoded from a body of ``body_bytes`` are counted at."""
    return body_bytes + spans * SPAN_OVERHEAD


class MemoryBudget:
    """Bytes reserved for bodies, and taken by spans queued or held (``spans()``, read from the
    queue and the feeder), against ``limit``."""

    def __init__(self, limit: int, spans: Callable[[], int]) -> None:
        self.limit = limit
        self.held_limit = int(limit * HELD_SHARE)
        self.spans = spans
        self.bodies = 0  # reserved for bodies being read or decoded
        self.peak = 0  # highest use since the allocator was last trimmed
        self._trim_due: float | None = None  # when a fall past TRIM_STEP, if it lasts, trims
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self.bodies + self.spans()

    def reserve_body(self, size: int) -> bool:
        """Room for a body of ``size`` bytes (and its decoded form)? Reserved when True."""
        want = size * (1 + DECODED_RATIO)
        with self._lock:
            used = self.bodies + self.spans()
            if used + want > self.limit:
                return False
            self.bodies += want
            if used + want > self.peak:
                self.peak = used + want
        return True

    def release_body(self, size: int) -> None:
        with self._lock:
            self.bodies -= size * (1 + DECODED_RATIO)

    def trim_after_burst(self, now: float) -> bool:
        """Give freed heap back to the OS once a burst is over: use fell by more than
        :data:`TRIM_STEP` and below half its peak, and stayed there for :data:`SETTLE_S` (so the
        burst's last objects are freed first; glibc keeps freed memory in its heaps otherwise).
        True when it trimmed."""
        used = self.used
        peak = max(self.peak, used)
        if peak - used > TRIM_STEP and used < peak // 2:
            if self._trim_due is None:
                self._trim_due = now + SETTLE_S
            elif now >= self._trim_due:
                trim()
                self.peak = used
                self._trim_due = None
                return True
        else:
            self._trim_due = None
        self.peak = peak
        return False


class Reservation:
    """One request's share of the budget: grown as its body arrives (and is inflated), released
    once its spans are queued (they are counted there) or the request is refused."""

    __slots__ = ("budget", "size")

    def __init__(self, budget: MemoryBudget) -> None:
        self.budget = budget
        self.size = 0

    def grow(self, n: int) -> bool:
        if n <= 0:
            return True
        if not self.budget.reserve_body(n):
            return False
        self.size += n
        return True

    def release(self) -> None:
        if self.size:
            self.budget.release_body(self.size)
            self.size = 0
