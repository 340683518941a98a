"""Listeners -> bounded ingest queue -> the engine, fed by one thread at a time.

Listeners decode, validate and :meth:`Pipeline.submit` a batch: it joins the bounded ingest
queue, and the listener's thread then feeds the queue to the engine (through
:class:`~otel_agenteval.replay.live.LiveFeeder`) unless another thread is doing so already; it
never waits for that thread (the ``turn`` lock is only tried). So the engine never sees
contention, and it mostly runs on the listeners' own threads, between one request and the
next: handing every batch to a consumer thread kept two busy threads trading the GIL, ~5-15% of
``serve``'s CPU over OTLP/HTTP (benchmarks/README.md). A listener plays at most about twice the
spans it brought, so a burst of due traces never holds a request (or the event loop) for long;
the feeder thread plays the rest, and every trace that falls due while no request comes. With
``custom_rules`` in the policy (user code, which may be slow or block) listeners only queue and
the feeder thread feeds everything, so a stalled rule never holds a listener (``/readyz`` says
when one batch has held the engine too long). The queue is bounded in spans: a full queue refuses
the batch (429 / ``RESOURCE_EXHAUSTED``, the client retries), counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from ..metrics import catalogue as catalogue
from ..metrics.catalogue import Declared
from ..metrics.collectors import SelfCollector
from ..metrics.monitor import build_monitor
from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from ..replay.live import UNBOUNDED, LiveFeeder
from ..replay.spanview import RecordedSpan
from .memory import MemoryBudget

log = logging.getLogger("otel_agenteval.serve")

OK, FULL, CLOSED = "ok", "full", "closed"
TICK_S = 0.05  # how often the feeder thread looks at the clock
LISTENER_SHARE = 2  # a listener plays up to this many times the spans it submitted


@dataclass
class Batch:
    """One request's spans and what they are counted at in the memory budget."""

    spans: list[RecordedSpan]
    nbytes: int = 0


class RequestLog(Protocol):
    """The write-ahead log as the pipeline uses it (:class:`.durability.Durability`)."""

    def log_request(self, spans: list[RecordedSpan], source: int, encoding: bytes,
                    body: bytes) -> Future[str] | None: ...
    def tick(self) -> None: ...
    def close(self, finished: bool) -> None: ...


class IngestQueue:
    """FIFO of span batches, bounded by the number of spans it holds."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.spans = 0
        self.nbytes = 0
        self._items: deque[Batch] = deque()
        self._lock = threading.Lock()
        self._closed = False

    def put(self, batch: Batch) -> str:
        with self._lock:
            if self._closed:
                return CLOSED
            if self.spans + len(batch.spans) > self.capacity:
                return FULL
            self._items.append(batch)
            self.spans += len(batch.spans)
            self.nbytes += batch.nbytes
        return OK

    def take(self) -> Batch | None:
        """The oldest batch, or None when there is none."""
        with self._lock:
            if not self._items:
                return None
            batch = self._items.popleft()
            self.spans -= len(batch.spans)
            self.nbytes -= batch.nbytes
            return batch

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def trace_ids(self) -> set[int]:
        """The traces of the spans queued now."""
        with self._lock:
            return {s._context[0] for batch in self._items for s in batch.spans}


class ReceiverMetrics:
    """The receiver's own series (``agenteval_receiver_*``), in the engine's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(d: Declared) -> Counter:
            return Counter(d.name, d.doc, d.labels, registry=registry)

        def gauge(d: Declared) -> Gauge:
            return Gauge(d.name, d.doc, d.labels, registry=registry)

        self.requests = counter(catalogue.RECEIVER_REQUESTS)
        self.spans = counter(catalogue.RECEIVER_SPANS)
        self.traces = counter(catalogue.RECEIVER_TRACES)
        self.duplicates = counter(catalogue.RECEIVER_DUPLICATES)
        self.errors = counter(catalogue.RECEIVER_ERRORS)
        self.queue_spans = gauge(catalogue.RECEIVER_QUEUE_SPANS)
        self.queue_capacity = gauge(catalogue.RECEIVER_QUEUE_CAPACITY)
        self.held_spans = gauge(catalogue.RECEIVER_HELD_SPANS)
        self.held_traces = gauge(catalogue.RECEIVER_HELD_TRACES)
        self.connections_closed = counter(catalogue.RECEIVER_CONNECTIONS_CLOSED)
        for protocol in ("grpc", "http"):
            for result in ("accepted", "rejected", "refused"):
                self.spans.labels(protocol, result)
        self.memory = gauge(catalogue.RECEIVER_MEMORY)
        self.memory_limit = gauge(catalogue.RECEIVER_MEMORY_LIMIT)
        self.drain_lost = counter(catalogue.RECEIVER_DRAIN_LOST)
        self.trims = counter(catalogue.RECEIVER_ALLOCATOR_TRIMS)
        for reason in ("root_end", "idle_timeout", "capacity", "memory", "shutdown"):
            self.traces.labels(reason)


class Pipeline:
    """The engine behind every listener, with its metrics, the queue, and the feeder thread."""

    def __init__(self, policy: Policy, registry: CollectorRegistry, *, queue_spans: int, grace_s: float,
                 idle_s: float, max_held_spans: int, log_violations: bool = True, memory_limit: int = UNBOUNDED,
                 fragment_linger_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 on_violation: tuple[Callable[[Violation], None], ...] = (),
                 on_trajectory: tuple[Callable[[Trajectory], None], ...] = ()) -> None:
        self.policy = policy
        monitor = build_monitor(policy, registry, on_violation=on_violation, on_trajectory=on_trajectory,
                                log_violations=log_violations, one_caller=True)  # one thread at a time: the turn
        self.engine = monitor.engine
        self.metrics = monitor.metrics
        pieces = self.engine.fragments  # pieces of runs, a trace each, held after their trace is played
        self.memory = MemoryBudget(memory_limit, lambda: self.queue.nbytes + self.feeder.held_bytes + pieces.bytes)
        self.feeder = LiveFeeder(self.engine, max_held_spans, clock=clock, grace_s=grace_s, idle_s=idle_s,
                                 max_bytes=self.memory.held_limit, fragment_linger_s=fragment_linger_s)
        self.queue = IngestQueue(queue_spans)
        c = self.counters = ReceiverMetrics(registry)
        registry.register(SelfCollector(self._stats, self.metrics))
        c.queue_capacity.set(queue_spans)
        c.queue_spans.set_function(lambda: self.queue.spans)
        c.held_spans.set_function(lambda: self.feeder.held_spans + pieces.size)
        c.held_traces.set_function(lambda: self.feeder.held_traces)
        c.memory.labels("bodies").set_function(lambda: self.memory.bodies)
        c.memory.labels("spans").set_function(self.memory.spans)
        c.memory_limit.set(memory_limit if memory_limit < UNBOUNDED else 0)
        self._counted = dict(self.feeder.completed)
        self._duplicates = 0
        self._turn = threading.Lock()  # held by the one thread feeding the engine
        # the policy's own rules are user code, which may be slow or block: listeners only queue,
        # so it never holds one (a full queue is refused as the engine falls behind)
        self.listeners_feed = not policy.custom_rules
        self._wake = threading.Event()  # the feeder thread: a batch to feed, or stop
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="agenteval-feeder", daemon=True)
        self.finished = threading.Event()
        self.wal: RequestLog | None = None  # serve --wal-dir: requests logged before acknowledged
        self.lost: dict[str, int] = {}  # what a drain that timed out left unchecked
        self.feeding_since = 0.0  # monotonic time the engine took its current batch (0: idle), for /readyz

    def _stats(self) -> dict[str, Any]:
        out = dict(self.engine.stats)
        out["late"] = int(out["late"]) + self.feeder.stats["late"]  # after the trace was played: late too
        return out

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Close the queue, let the feeder thread drain it and finalise what is held; True when done. When
        ``timeout`` runs out first, what is left unchecked is counted, logged and kept in :attr:`lost`."""
        self.queue.close()
        self._closing = True
        self._wake.set()
        if self._thread.ident is None:  # never started (a listener could not bind): nothing taken in
            return True
        self._thread.join(timeout)  # at once when it has ended
        if not self.finished.is_set() and not self.lost:
            self._count_lost(timeout)
        return self.finished.is_set()

    def log(self, spans: list[RecordedSpan], source: int, encoding: bytes, body: bytes) -> Future[str] | None:
        """With ``--wal-dir``: log a request as received before :meth:`submit`; the future is
        ``OK`` once it is synced, else the refusal. None without a log (or spans)."""
        return None if self.wal is None or not spans else self.wal.log_request(spans, source, encoding, body)

    @contextmanager
    def still(self) -> Iterator[None]:
        """No thread feeds the engine while the block runs (a scrape with ``--wal-dir``)."""
        with self._turn:
            yield

    def _count_lost(self, timeout: float | None) -> None:
        queued = self.queue.trace_ids()
        held_traces, open_runs = self.feeder.held_traces, self.engine.open_trajectories
        self.lost = {"runs": len(queued) + held_traces + open_runs, "queued_traces": len(queued),
                     "held_traces": held_traces, "open_runs": open_runs,
                     "spans": self.queue.spans + self.feeder.held_spans + self.engine.fragments.size}
        self.counters.drain_lost.labels("runs").inc(self.lost["runs"])
        self.counters.drain_lost.labels("spans").inc(self.lost["spans"])
        log.error("agenteval serve: the drain did not finish within %ss (--drain-timeout): %d runs not checked (%d "
                  "traces queued, %d held, %d runs open in the engine), %d spans", timeout, self.lost["runs"], len(queued),
                  held_traces, open_runs, self.lost["spans"])
        if self.wal is not None:
            log.error("agenteval serve: those runs are kept in the write-ahead log: the next start with the same "
                      "--wal-dir plays them")

    def submit(self, batch: list[RecordedSpan], nbytes: int = 0) -> str:
        """Queue a listener's batch (``OK``, ``FULL`` or ``CLOSED``), counted at ``nbytes`` in the
        memory budget (:func:`~.memory.span_bytes`); then feed the engine on this thread, unless
        another one is feeding it (or the policy has rules of its own: then the feeder thread does)."""
        got = self.queue.put(Batch(batch, nbytes))
        if got == OK:
            if self.listeners_feed:
                self._feed(self._turn.acquire(blocking=False), LISTENER_SHARE * len(batch))
            else:
                self._wake.set()
        return got

    def _feed(self, turn: bool, budget: int) -> None:
        """With the turn taken (``turn``): hold the oldest queued batch, play what is due (up to
        ``budget`` spans), let the turn go; again while batches wait, the budget lasts and the turn
        is free. One batch at a time, as the engine keeps up: when it does not, batches wait in
        the queue, and a full queue is refused (the client retries) rather than held."""
        queue, feeder = self.queue, self.feeder
        while turn:
            self.feeding_since = time.monotonic()
            try:
                batch = queue.take()
                if batch is not None:
                    feeder.hold(batch.spans, batch.nbytes)
                held = feeder.held_spans
                feeder.tick(budget)
                budget -= held - feeder.held_spans
                self._count_traces()
            except Exception:  # never let a listener or the feeder thread fail on the engine's account
                log.exception("agenteval serve: error while feeding the engine")
                self.counters.errors.labels("feed").inc()
            finally:
                self.feeding_since = 0.0
                self._turn.release()
            # a batch queued while the turn was held (its listener found the turn taken), or left
            turn = queue.spans > 0 and budget > 0 and self._turn.acquire(blocking=False)

    def _run(self) -> None:
        """The feeder thread: what falls due between requests, and what listeners left."""
        while not self._closing:
            self._wake.wait(TICK_S)
            self._wake.clear()
            self._feed(self._turn.acquire(), UNBOUNDED)
            if self.memory.trim_after_burst(time.monotonic()):
                self.counters.trims.inc()
            if self.wal is not None:
                with self._turn:
                    self.wal.tick()
        finished = False
        with self._turn:
            try:
                while (batch := self.queue.take()) is not None:
                    self.feeder.hold(batch.spans, batch.nbytes)
                self.feeder.close_held()
                finished = True
            except Exception:
                log.exception("agenteval serve: error while finalising at shutdown")
                self.counters.errors.labels("shutdown").inc()
            self._count_traces()
        if self.wal is not None:
            self.wal.close(finished)  # everything played: the log is no longer needed
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
