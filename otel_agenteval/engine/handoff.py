"""Span ends handed to one consumer thread: ``TrajectoryProcessor(background=True)``.

As the SDK's ``BatchSpanProcessor`` hands finished spans to its exporter thread, ``on_end`` here
only queues the span; routing at ``on_start`` stays in the app's thread (it is a dict write), and
the checks, metrics, logs and callbacks run on the consumer, in the order the spans ended. So
``span.end()`` costs the app about what the SDK's own processors cost, and a slow rule or callback
delays only the monitor. The queue is bounded (``max_queue_size``). A span that finds it full
waits for room while the consumer is making progress (the app's threads ending spans faster than
one thread can check them are slowed to its pace, as checking inline would, rather than losing
most of their spans: 32 busy threads dropped 93.7% before); it is dropped and counted
(``agenteval_spans_dropped_total{reason="queue_full"}``) only when the consumer has applied
nothing for :data:`STALL_S` (it is inside a slow rule or callback) or after :data:`MAX_WAIT_S`.
``force_flush`` waits for what is queued; ``shutdown`` checks what is queued for up to
:data:`SHUTDOWN_DRAIN_S` and counts the rest (``shutdown_timeout``), so a backlog behind a slow
rule never holds up the app's exit. A forked child starts with an empty queue and a consumer of
its own, as ``BatchSpanProcessor`` does.

The guard asks :meth:`Handoff.settle` before it decides: when span ends are queued or being
applied, it waits (for up to :data:`SETTLE_S`) until they are, so a call is decided on everything
ended before it, as inline. With nothing queued it costs two attribute reads.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from .engine import Engine
from .threadstate import in_monitor

SHUTDOWN_DRAIN_S = 5.0  # how long shutdown() checks what is still queued
STALL_S = 0.02  # a full queue: the consumer applied nothing for this long -> drop, do not wait
MAX_WAIT_S = 1.0  # a full queue: the longest a span's end waits for room
SETTLE_S = 1.0  # the longest the guard waits for the span ends queued before its call


class _Flush:
    """A mark in the queue: set once every span queued before it has been applied."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class Handoff:
    def __init__(self, engine: Engine, max_queue_size: int) -> None:
        if max_queue_size < 1:
            raise ValueError(f"max_queue_size must be at least 1, not {max_queue_size}")
        self._engine = engine
        self._max = max_queue_size
        self._queue: deque[Any] = deque()
        self._wake = threading.Event()
        self._room = threading.Condition(threading.Lock())  # a full queue's waiters, told of room
        self._waiters = 0
        self._applied = 0  # spans the consumer has applied (progress, for the waiters)
        self._busy = False  # the consumer is applying what it found queued (set before it takes any)
        self._stopping = False
        self._deadline = 0.0  # once stopping: past this (monotonic), what is queued is counted, not checked
        self._thread: threading.Thread | None = None
        self._start()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._consume, name="otel-agenteval-checks", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def end(self, span: Any) -> None:
        """``on_end``: queue the span for the consumer; never blocks, never raises."""
        try:
            if self._stopping or in_monitor():
                self._engine.end(span)  # counted there: after shutdown, or made by the monitor's own code
                return
            queue = self._queue
            if len(queue) >= self._max and not self._wait_for_room():
                self._engine.count_drop("queue_full")
                return
            queue.append(span)
            if not self._wake.is_set():  # after the append: the consumer clears before it looks
                self._wake.set()
        except Exception:
            self._engine.count_error("on_end")

    def _wait_for_room(self) -> bool:
        """The queue is full: wait while the consumer makes progress; False to drop the span."""
        deadline = time.monotonic() + MAX_WAIT_S
        queue, room = self._queue, self._room
        with room:
            self._waiters += 1
            try:
                while len(queue) >= self._max:
                    seen = self._applied
                    room.wait(STALL_S)
                    if len(queue) < self._max:
                        return True
                    if self._applied == seen or self._stopping or time.monotonic() > deadline:
                        return False  # stuck inside a rule, or shutting down: do not hold the app
                return True
            finally:
                self._waiters -= 1

    def _consume(self) -> None:
        queue, wake, end, room = self._queue, self._wake, self._engine.end, self._room
        while True:
            self._busy = True  # before the first pop: settle() sees a span either queued or being applied
            while queue:
                item = queue.popleft()
                try:
                    if type(item) is _Flush:
                        item.done.set()
                    else:
                        end(item)  # catches every Exception
                except BaseException:  # a rule's sys.exit(): this thread must not die and leave the checks blind
                    self._engine.count_error("on_end")
                self._applied += 1
                if self._waiters:  # an app thread waits for room: there is some now
                    with room:
                        room.notify()
                if self._stopping and time.monotonic() > self._deadline:
                    self._give_up()
            self._busy = False  # after the last span taken was applied
            if self._stopping:
                return
            wake.clear()
            if not queue:
                wake.wait()

    def flush(self, timeout_s: float) -> bool:
        """Wait until every span queued so far has been applied; False on timeout."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return not self._queue
        mark = _Flush()
        self._queue.append(mark)  # past the bound: a mark is not a span
        self._wake.set()
        return mark.done.wait(timeout_s)

    def settle(self, timeout_s: float | None = None) -> bool:
        """Wait until every span end queued before this call has been applied (the guard then sees
        the runs as it would inline); True at once when none is queued or being applied, False if
        they were not applied within ``timeout_s`` (default :data:`SETTLE_S`; the consumer is inside a
        slow rule or callback)."""
        if not self._queue and not self._busy:
            return True
        if threading.current_thread() is self._thread:
            return True  # asked from a rule or callback on the consumer: what came before is applied
        return self.flush(SETTLE_S if timeout_s is None else timeout_s)

    def _give_up(self) -> None:
        """Shutdown's time is up: what is still queued is counted, not checked."""
        queue = self._queue
        while queue:
            item = queue.popleft()
            if type(item) is _Flush:
                item.done.set()
            else:
                self._engine.count_drop("shutdown_timeout")

    def close(self, timeout_s: float | None = None) -> bool:
        """Apply what is queued (for up to ``timeout_s``, default :data:`SHUTDOWN_DRAIN_S`; the
        rest is counted), then stop the consumer; spans ended after this are applied in the
        caller's thread (the engine counts them once it is closed). False if the consumer was
        still inside a rule at the end."""
        if timeout_s is None:
            timeout_s = SHUTDOWN_DRAIN_S
        self._deadline = time.monotonic() + timeout_s
        self._stopping = True  # from now on end() checks in the caller's thread, as the default does
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s + 1.0)  # a rule that was running when time ran out may finish
            if thread.is_alive():
                self._give_up()
                return False
        return True

    def after_fork(self) -> None:
        """In a forked child: the parent's queue and consumer are not ours; a fresh one of each."""
        self._queue = deque()
        self._wake = threading.Event()
        self._room = threading.Condition(threading.Lock())
        self._waiters = 0
        self._busy = False
        if not self._stopping:
            self._start()
