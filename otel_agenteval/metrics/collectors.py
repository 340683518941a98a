"""The Prometheus collectors: the plain series and the engine's counters, turned into metric
families when Prometheus scrapes.

Plain Python (not compiled with the hot path): they subclass prometheus_client's ``Collector``,
and they run once per scrape, not once per span.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from ..reading.unread import UNKNOWN_SCOPE
from . import catalogue as m
from .series import PlainCounter, PlainHistogram

UNSTITCHED_REASONS = ("alone", "buffer_full", "concurrent", "memory")  # engine/fragments/: why pieces were left apart


def _family(d: m.Declared, value: float | None = None) -> CounterMetricFamily:
    """A counter family as ``d`` declares it (a single value: a family without labels)."""
    if value is not None:
        return CounterMetricFamily(d.name, d.doc, value=value)
    return CounterMetricFamily(d.name, d.doc, labels=d.labels)


class PlainCollector(Collector):
    """Serves a set of plain series; ``lock`` is the one their writers hold."""

    def __init__(self, series: Iterable[PlainCounter | PlainHistogram], lock: AbstractContextManager[Any]) -> None:
        self._series = tuple(series)
        self._lock = lock

    def relock(self, lock: AbstractContextManager[Any]) -> None:
        """The writers' new lock (a forked child's)."""
        self._lock = lock

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            families = [s.family() for s in self._series]
        return families


class _Overflow(Protocol):
    @property
    def overflow(self) -> int: ...


class MetricsView(Protocol):
    """What the self collector reads of ``metrics.Metrics`` (named here, not imported: no cycle)."""

    @property
    def agent_label(self) -> _Overflow: ...

    @property
    def tool_label(self) -> _Overflow: ...

    def tool_calls(self, counts: dict[Any, int]) -> Metric: ...


class SelfCollector(Collector):
    """The monitor's own health, read from the engine's plain counters at scrape time."""

    def __init__(self, stats: Callable[[], dict[str, Any]], metrics: MetricsView | None = None) -> None:
        self._stats = stats
        self._metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        s = self._stats()
        if self._metrics is not None:
            yield self._metrics.tool_calls(s["tool_calls"])
            overflow = _family(m.LABEL_OVERFLOW)
            overflow.add_metric(("agent_name",), self._metrics.agent_label.overflow)
            overflow.add_metric(("tool",), self._metrics.tool_label.overflow)
            yield overflow
        spans = _family(m.SPANS)
        for kind, n in sorted(s["spans"].items()):
            spans.add_metric((kind,), n)
        yield spans
        evicted = _family(m.EVICTED)
        for reason, n in sorted(s["evicted"].items()):
            evicted.add_metric((reason,), n)
        yield evicted
        yield _family(m.LATE_SPANS, s["late"])
        unread = _family(m.UNREAD_SPANS)
        counts = s["unread"]
        if UNKNOWN_SCOPE not in counts:
            unread.add_metric((UNKNOWN_SCOPE,), 0)  # one series from the start: increase() sees the first span
        for scope, n in sorted(counts.items()):
            unread.add_metric((scope,), n)
        yield unread
        # pieces of runs, a trace each: as unread spans, one series of each from the start
        for declared, key in ((m.FRAGMENTED_SPANS, "fragmented"), (m.FRAGMENTS_STITCHED, "fragments_stitched")):
            family = _family(declared)
            for scope, n in sorted({UNKNOWN_SCOPE: 0, **s[key]}.items()):
                family.add_metric((scope,), n)
            yield family
        unstitched = _family(m.FRAGMENTS_UNSTITCHED)
        for (scope, reason), n in sorted({**{(UNKNOWN_SCOPE, r): 0 for r in UNSTITCHED_REASONS},
                                          **s["fragments_unstitched"]}.items()):
            unstitched.add_metric((scope, reason), n)
        yield unstitched
        yield _family(m.STEPS_DROPPED, s["steps_dropped"])
        yield _family(m.OPEN_SPANS_DROPPED, s["routes_dropped"])
        dropped = _family(m.SPANS_DROPPED)
        for reason, n in sorted(s["dropped"].items()):
            dropped.add_metric((reason,), n)
        yield dropped
        yield _family(m.STATE_DROPPED, s["state_dropped"])
        yield _family(m.CLOCK_SKEW, s["clock_skew"])
        lines = _family(m.LOG_LINES_DROPPED)
        for event, n in sorted(s["log_lines_dropped"].items()):
            lines.add_metric((event,), n)
        yield lines
        conv = _family(m.CONVERSATIONS_EVICTED)
        for reason, n in sorted(s["conversations_evicted"].items()):
            conv.add_metric((reason,), n)
        yield conv
        errors = _family(m.PROCESSOR_ERRORS)
        for stage, n in sorted(s["errors"].items()):
            errors.add_metric((stage,), n)
        yield errors
