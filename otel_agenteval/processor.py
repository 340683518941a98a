"""``TrajectoryProcessor``: the span processor users add to their ``TracerProvider``.

``on_start``/``on_end`` never raise, never block on I/O, and hold the engine's lock only
for bookkeeping: rules, metrics, logs and callbacks run with no lock held (see the engine).
By default a span is checked in the thread that ends it (the findings are there when ``end()``
returns, like the SDK's ``SimpleSpanProcessor``); ``background=True`` hands span ends to one
consumer thread, bounded, like ``BatchSpanProcessor`` (see :mod:`.handoff`).
``clock`` (monotonic ns; default the process's) drives expiry: injectable for tests.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from prometheus_client import CollectorRegistry, Gauge

from .engine.engine import Engine
from .engine.store import ProcessClock
from .metrics.catalogue import QUEUED_SPANS
from .metrics.collectors import SelfCollector
from .metrics.evaluation_events import for_policy, with_events
from .metrics.monitor import build_monitor
from .metrics.prometheus import Metrics
from .model.trajectory import Trajectory
from .model.violation import Violation
from .policy.policy import Policy
from .rules import Rule

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .engine.handoff import Handoff
    from .guard.guard import Guard
    from .judging.result import Judge, Judgement
    from .judging.sink import JudgeSink


class TrajectoryProcessor(SpanProcessor):
    """Rebuilds agent trajectories from finished spans, checks them inline, counts them.

    >>> provider.add_span_processor(TrajectoryProcessor(Policy.from_file("agenteval.yaml")))

    ``background=True`` checks on one thread of its own instead of in ``end()``, with at most
    ``max_queue_size`` span ends waiting (more are dropped, counted): see :mod:`.handoff`.

    ``logger_provider`` (or ``outputs.evaluation_events: true`` in the policy, for the global one)
    emits each violation as a ``gen_ai.evaluation.result`` log record on the offending span.
    ``meter_provider`` records every metric through OpenTelemetry too (the GenAI agent metrics and
    ``agenteval.*``; see :mod:`.otel_metrics`).

    ``judge`` (a callable ``trajectory -> JudgeResult``; default the policy's ``judge.endpoint``)
    scores the runs the policy's ``judge`` section samples, on threads of its own: see docs/judge.md.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        registry: CollectorRegistry | None = None,
        on_violation: Iterable[Callable[[Violation], None]] = (),
        on_trajectory: Iterable[Callable[[Trajectory], None]] = (),
        rules: Sequence[Rule] | None = None,
        finalise_on_flush: bool = True,
        clock: Callable[[], int] | None = None,
        background: bool = False,
        max_queue_size: int = 8192,
        logger_provider: LoggerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        judge: Judge | None = None,
        on_judgement: Iterable[Callable[[Judgement], None]] = (),
    ) -> None:
        self.finalise_on_flush = finalise_on_flush
        self.policy = policy if policy is not None else Policy()
        # findings as gen_ai.evaluation.result log records on the trace (metrics/evaluation_events.py)
        events = for_policy(self.policy, logger_provider)
        on_violation, on_trajectory = with_events(events, on_violation, on_trajectory)
        self.judging: JudgeSink | None = None  # the sampled judge (policy judge:), on its own threads
        if self.policy.judge.enabled:
            from .judging.sink import judging_for  # imported when asked for

            self.judging = judging_for(self.policy.judge, judge, registry, events, on_judgement=tuple(on_judgement))
            if self.judging is not None:
                on_violation, on_trajectory = ((*on_violation, self.judging.violation),
                                               (*on_trajectory, self.judging.finished))
        monitor = build_monitor(self.policy, registry, on_violation=on_violation, on_trajectory=on_trajectory,
                                rules=rules, clock=ProcessClock(clock), meter_provider=meter_provider)
        self.engine: Engine = monitor.engine
        self.metrics: Metrics = monitor.metrics
        self.metrics.registry.register(SelfCollector(lambda: self.engine.stats, self.metrics))
        self._shut = False
        self._guard: Guard | None = None
        self._handoff: Handoff | None = None
        if background:
            from .engine.handoff import Handoff  # imported when asked for

            handoff = self._handoff = Handoff(self.engine, max_queue_size)
            Gauge(QUEUED_SPANS.name, QUEUED_SPANS.doc, registry=self.metrics.registry).set_function(lambda: handoff.queued)
        # a forked child (gunicorn --preload, multiprocessing) starts with a fresh lock and no runs
        # of its parent's, as the SDK's BatchSpanProcessor does for its queue
        if hasattr(os, "register_at_fork"):
            after_fork = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (m := after_fork()) is not None and m())

    def _after_fork(self) -> None:
        try:
            self.engine.after_fork()
            self.metrics.after_fork()
            if self._handoff is not None:
                self._handoff.after_fork()
            if self.judging is not None:
                self.judging.queue.after_fork()
        except Exception:
            self.engine.count_error("shutdown")

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """The span's route to its run (a dict write), in the thread that starts it; never raises:
        errors are counted in agenteval_processor_errors_total."""
        self.engine.start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """The span checked and counted in the thread that ends it, or (``background=True``) queued
        for the checks' thread; never raises."""
        handoff = self._handoff
        if handoff is None:
            self.engine.end(span)
        else:
            handoff.end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Check what is queued (``background=True``), then finalise every open trajectory as
        ``incomplete`` so nothing in flight is lost.

        Right before a process freezes or exits (serverless, batch jobs). An app that flushes
        periodically while runs are in flight should pass ``finalise_on_flush=False``:
        then only :meth:`shutdown` finalises what is open.
        """
        if self._handoff is not None and not self._handoff.flush(timeout_millis / 1000):
            return False
        if not self.finalise_on_flush and not self._shut:
            return True
        try:
            self.engine.finalise_all("shutdown")
        except Exception:
            self.engine.count_error("shutdown")
            return False
        return True

    def shutdown(self) -> None:
        """Finalise what is open as ``incomplete``; spans that end afterwards are counted, not processed."""
        if self._shut:
            return
        self._shut = True
        try:
            if self._handoff is not None:
                self._handoff.close()  # what is queued is checked first (for a few seconds at most)
            self.engine.close()
            if self.judging is not None:
                self.judging.close()  # queued runs get two seconds; the rest are counted dropped
        except Exception:
            self.engine.count_error("shutdown")

    def guard(self, *, tracer_provider: TracerProvider | None = None) -> Guard:
        """The :class:`~otel_agenteval.guard.guard.Guard` on this processor's policy, rules and live runs
        (one per processor: what it allowed and what is still running is shared by every caller).

        ``tracer_provider``: where a stopped call with no tool span open gets a span of its own
        (default: the global provider)."""
        g = self._guard
        if g is None:
            from .guard.guard import Guard  # imported when asked for

            e, handoff = self.engine, self._handoff
            g = self._guard = Guard(e._dispatch, e._store, e._routes, self.metrics.guard(), e._events.sinks.lines,
                                    tracer_provider, settle=handoff.settle if handoff is not None else None)
        return g

    def stats(self) -> dict[str, Any]:
        """A copy of the processor's own counters (spans, evictions, late spans, errors)."""
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.engine.stats.items()}
