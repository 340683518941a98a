"""The product's own log lines (a violation, an inferred write, an internal error): through
structlog as the app configured it; to stderr when the app configured nothing. structlog's
default prints to stdout, which belongs to the app (and to the commands' data: JSON, tables).

Lines that come at the rate of the app's calls (a violation, a stopped call) are sampled as the
OpenTelemetry Collector samples its own log: :class:`LineSampling`."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

# per kind of line, the first FIRST in each TICK_NS are written, then one in THEREAFTER (the
# Collector's defaults for service.telemetry.logs.sampling; the policy's outputs.log_sampling sets them)
FIRST = 10
THEREAFTER = 100
TICK_NS = 10 * 10**9  # 10 s
MAX_KINDS = 1024  # kinds of line told apart; past it, a new kind shares its event's count

_LOCK = threading.Lock()  # a few dict and int operations per line; no logging under it


def _renew_lock() -> None:  # a thread of the parent may have held it at the fork
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock)


class ProductLog:
    """``log.warning(event, **fields)`` and the rest of structlog's methods, routed at each call
    (an app may configure structlog after importing this package)."""

    __slots__ = ("_name",)

    def __init__(self, name: str = "otel_agenteval") -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        if structlog.is_configured():
            return getattr(structlog.get_logger(self._name), method)
        return getattr(structlog.wrap_logger(structlog.PrintLogger(sys.stderr)), method)


def product_log() -> Any:
    """The product's logger (typed ``Any``, as ``structlog.get_logger`` is)."""
    return ProductLog()


class _Window:
    __slots__ = ("dropped", "seen", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.seen = 0  # lines of this kind in the window, written or not
        self.dropped = 0  # not written since the last one that was


class LineSampling:
    """Which of a repeated line's occurrences are written: per kind (its event and what tells the
    lines apart, e.g. rule, service, agent and tool), by default the first :data:`FIRST` in each
    10 s (:data:`TICK_NS`), then one in :data:`THEREAFTER`. Each line left out is counted in
    ``dropped`` (by event; ``agenteval_log_lines_dropped_total``), and the next line written of its
    kind says how many it follows (``lines_dropped``). A loop of stopped calls costs the app's
    logger a few lines, not one per call; what was stopped is still on every span and counter.

    ``clock``: monotonic ns (the engine's, injectable); ``None``: every line is written. ``first``,
    ``thereafter`` and ``tick_ns``: the schedule (the policy's ``outputs.log_sampling``); ``thereafter``
    0 writes none past the first until the next window, as the Collector's."""

    def __init__(self, dropped: dict[str, int], clock: Callable[[], int] | None = time.monotonic_ns,
                 first: int = FIRST, thereafter: int = THEREAFTER, tick_ns: int = TICK_NS) -> None:
        self.dropped = dropped  # event -> lines not written
        self._clock = clock
        self._first, self._thereafter, self._tick_ns = first, thereafter, tick_ns
        self._kinds: dict[tuple[str | None, ...], _Window] = {}
        self._swept: int | None = None  # when kinds were last forgotten (at most once a window)

    def admit(self, event: str, *kind: str | None) -> int | None:
        """``None``: leave this line out (counted); else how many lines of its kind were left out
        since the last one written (0 for most)."""
        if self._clock is None:
            return 0
        now = self._clock()
        key = (event, *kind)
        with _LOCK:
            w = self._kinds.get(key)
            if w is None:
                if len(self._kinds) >= MAX_KINDS and (self._swept is None or now - self._swept >= self._tick_ns):
                    self._forget(now)
                if len(self._kinds) >= MAX_KINDS:
                    key = (event,)  # past the bound, the event's other kinds are one
                    w = self._kinds.get(key)
                if w is None:
                    w = self._kinds[key] = _Window(now)
            if now - w.start >= self._tick_ns:
                w.start, w.seen = now, 0  # a new window; what was left out is told by its first line
            w.seen += 1
            first, thereafter = self._first, self._thereafter
            if w.seen <= first or (thereafter and (w.seen - first) % thereafter == 0):
                dropped, w.dropped = w.dropped, 0
                return dropped
            w.dropped += 1
            self.dropped[event] = self.dropped.get(event, 0) + 1
            return None

    def _forget(self, now: int) -> None:
        """Kinds whose window is over with nothing left out untold: they would start afresh."""
        self._swept = now
        for key in [k for k, w in self._kinds.items() if now - w.start >= self._tick_ns and not w.dropped]:
            del self._kinds[key]


__all__ = ["FIRST", "MAX_KINDS", "THEREAFTER", "TICK_NS", "LineSampling", "ProductLog", "product_log"]
