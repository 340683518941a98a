"""Listeners -> bounded ingest queue -> one consumer thread -> the engine.

Listeners only decode, validate and :meth:`IngestQueue.put`; the consumer thread alone calls the
engine (through :class:`~otel_agenteval.replay.live.LiveFeeder`), so the engine
never sees contention. The queue is bounded in spans: a full queue refuses the batch (the
listener answers 429 / ``RESOURCE_EXHAUSTED`` and the client retries), counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from ..collectors import SelfCollector
from ..monitor import build_monitor
from ..policy import Policy
from ..replay.live import LiveFeeder
from ..replay.spanview import RecordedSpan
from ..trajectory import Trajectory
from ..violation import Violation

log = logging.getLogger("otel_agenteval.serve")

OK, FULL, CLOSED = "ok", "full", "closed"
TICK_S = 0.05  # how often the consumer looks at the clock when no batch comes


class IngestQueue:
    """FIFO of span batches, bounded by the number of spans it holds."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.spans = 0
        self._items: deque[list[RecordedSpan]] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._closed = False

    def put(self, batch: list[RecordedSpan]) -> str:
        with self._cond:
            if self._closed:
                return CLOSED
            if self.spans + len(batch) > self.capacity:
                return FULL
            self._items.append(batch)
            self.spans += len(batch)
            self._cond.notify()
        return OK

    def get(self, timeout: float) -> list[RecordedSpan] | None:
        """The next batch; None after ``timeout`` with nothing queued; [] when closed and drained."""
        with self._cond:
            if not self._items:
                if self._closed:
                    return []
                self._cond.wait(timeout)
                if not self._items:
                    return [] if self._closed else None
            batch = self._items.popleft()
            self.spans -= len(batch)
            return batch

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class ReceiverMetrics:
    """The receiver's own series (``agenteval_receiver_*``), in the engine's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("agenteval_receiver_requests", "OTLP export requests, by protocol and result.",
                                ("protocol", "result"), registry=registry)
        self.spans = Counter("agenteval_receiver_spans",
                             "Spans received: accepted into the queue, rejected as unreadable (partial success), "
                             "or refused for the client to retry (queue full, shutting down).",
                             ("protocol", "result"), registry=registry)
        self.traces = Counter("agenteval_receiver_traces", "Traces played into the engine, by why they were due.",
                              ("reason",), registry=registry)
        self.duplicates = Counter("agenteval_receiver_duplicate_spans",
                                  "Spans received twice for a trace (client retries), played once.", registry=registry)
        self.errors = Counter("agenteval_receiver_errors", "Unexpected errors in the receiver, by stage.",
                              ("stage",), registry=registry)
        self.queue_spans = Gauge("agenteval_receiver_queue_spans", "Spans waiting in the ingest queue.",
                                 registry=registry)
        self.queue_capacity = Gauge("agenteval_receiver_queue_capacity_spans", "Ingest queue bound, in spans.",
                                    registry=registry)
        self.held_spans = Gauge("agenteval_receiver_held_spans", "Spans held while their traces complete.",
                                registry=registry)
        self.held_traces = Gauge("agenteval_receiver_held_traces", "Traces held while they complete.",
                                 registry=registry)
        for protocol in ("grpc", "http"):
            for result in ("accepted", "rejected", "refused"):
                self.spans.labels(protocol, result)
        for reason in ("root_end", "idle_timeout", "capacity", "shutdown"):
            self.traces.labels(reason)


class Pipeline:
    """The engine behind every listener, with its metrics and the consumer thread that feeds it."""

    def __init__(self, policy: Policy, registry: CollectorRegistry, *, queue_spans: int, grace_s: float,
                 idle_s: float, max_held_spans: int, log_violations: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 on_violation: tuple[Callable[[Violation], None], ...] = (),
                 on_trajectory: tuple[Callable[[Trajectory], None], ...] = ()) -> None:
        self.policy = policy
        monitor = build_monitor(policy, registry, on_violation=on_violation, on_trajectory=on_trajectory,
                                log_violations=log_violations, one_caller=True)  # the consumer thread only
        self.engine = monitor.engine
        self.metrics = monitor.metrics
        self.feeder = LiveFeeder(self.engine, max_held_spans, clock=clock, grace_s=grace_s, idle_s=idle_s)
        self.queue = IngestQueue(queue_spans)
        self.counters = ReceiverMetrics(registry)
        registry.register(SelfCollector(self._stats, self.metrics))
        c = self.counters
        c.queue_capacity.set(queue_spans)
        c.queue_spans.set_function(lambda: self.queue.spans)
        c.held_spans.set_function(lambda: self.feeder.held_spans)
        c.held_traces.set_function(lambda: self.feeder.held_traces)
        self._counted = dict(self.feeder.completed)
        self._duplicates = 0
        self._thread = threading.Thread(target=self._run, name="agenteval-consumer", daemon=True)
        self.finished = threading.Event()

    def _stats(self) -> dict[str, Any]:
        s = self.engine.stats
        out = dict(s)
        out["late"] = int(s["late"]) + self.feeder.stats["late"]  # after the trace was played: late too
        return out

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Close the queue, let the consumer drain it and finalise what is held; True when done."""
        self.queue.close()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return self.finished.is_set()

    def _run(self) -> None:
        queue, feeder = self.queue, self.feeder
        while True:
            try:
                batch = queue.get(TICK_S)
                if batch:
                    feeder.hold(batch)
                elif batch is not None:  # closed and drained
                    break
                feeder.tick()
                self._count_traces()
            except Exception:  # never let the one consumer die
                log.exception("agenteval serve: consumer error")
                self.counters.errors.labels("consumer").inc()
        try:
            feeder.close_held()
        except Exception:
            log.exception("agenteval serve: error while finalising at shutdown")
            self.counters.errors.labels("shutdown").inc()
        self._count_traces()
        self.finished.set()

    def _count_traces(self) -> None:
        for reason, n in self.feeder.completed.items():
            delta = n - self._counted[reason]
            if delta:
                self.counters.traces.labels(reason).inc(delta)
                self._counted[reason] = n
        dup = self.feeder.duplicates
        if dup != self._duplicates:
            self.counters.duplicates.inc(dup - self._duplicates)
            self._duplicates = dup
