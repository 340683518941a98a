"""Per-thread state of the monitor. Plain Python on purpose: a ``threading.local`` subclass (its
class attribute is every thread's default) cannot be a compiled class."""

from __future__ import annotations

import threading


class MonitorThread(threading.local):
    """``active`` while this thread runs the monitor's own code (rules, sinks)."""

    active = False


guard = MonitorThread()
