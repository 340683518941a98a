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

from ._series import PlainCounter, PlainHistogram
from .unread import UNKNOWN_SCOPE


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
            overflow = CounterMetricFamily(
                "agenteval_label_overflow",
                "Metric updates whose agent_name or tool was counted as `other` because "
                "limits.max_agent_labels / limits.max_tool_labels was reached, by label.",
                labels=("label",))
            overflow.add_metric(("agent_name",), self._metrics.agent_label.overflow)
            overflow.add_metric(("tool",), self._metrics.tool_label.overflow)
            yield overflow
        spans = CounterMetricFamily("agenteval_spans", "Spans seen at end, by kind.", labels=("kind",))
        for kind, n in sorted(s["spans"].items()):
            spans.add_metric((kind,), n)
        yield spans
        evicted = CounterMetricFamily("agenteval_trajectories_evicted",
                                      "Trajectories finalised early as incomplete, by reason.", labels=("reason",))
        for reason, n in sorted(s["evicted"].items()):
            evicted.add_metric((reason,), n)
        yield evicted
        yield CounterMetricFamily("agenteval_late_spans", "Spans that ended after their trajectory was finalised.",
                                  value=s["late"])
        unread = CounterMetricFamily("agenteval_unread_spans",
                                     "Spans that look like agent work (gen_ai.*, llm.*, ai.*, traceloop.*, haystack.*, "
                                     "OpenInference) but were read as no tool call, model call or agent run, by "
                                     "instrumentation scope (unknown: none recorded; other: past 64 scopes).",
                                     labels=("scope",))
        counts = s["unread"]
        if UNKNOWN_SCOPE not in counts:
            unread.add_metric((UNKNOWN_SCOPE,), 0)  # one series from the start: increase() sees the first span
        for scope, n in sorted(counts.items()):
            unread.add_metric((scope,), n)
        yield unread
        yield CounterMetricFamily("agenteval_steps_dropped",
                                  "Tool steps not kept because a trajectory hit max_steps_per_trajectory (still counted).",
                                  value=s["steps_dropped"])
        yield CounterMetricFamily("agenteval_open_spans_dropped",
                                  "Open spans forgotten because limits.max_open_spans was reached.",
                                  value=s["routes_dropped"])
        dropped = CounterMetricFamily("agenteval_spans_dropped",
                                      "Spans not processed, by reason: ended by the monitor's own rules or callbacks "
                                      "(reentrant), delivered twice (duplicate), ended after shutdown, found the "
                                      "checks' queue full (queue_full) or still queued when shutdown's time ran out (shutdown_timeout), "
                                      "both with background=True.",
                                      labels=("reason",))
        for reason, n in sorted(s["dropped"].items()):
            dropped.add_metric((reason,), n)
        yield dropped
        yield CounterMetricFamily("agenteval_state_dropped",
                                  "Entries of bounded per-run and per-conversation maps not kept (writes, repeats).",
                                  value=s["state_dropped"])
        yield CounterMetricFamily("agenteval_clock_skew_spans",
                                  "Recorded spans dated more than a day past the wall clock (not moving the replay clock).",
                                  value=s["clock_skew"])
        conv = CounterMetricFamily("agenteval_conversations_evicted", "Conversation states dropped, by reason.",
                                   labels=("reason",))
        for reason, n in sorted(s["conversations_evicted"].items()):
            conv.add_metric((reason,), n)
        yield conv
        errors = CounterMetricFamily("agenteval_processor_errors",
                                     "Exceptions caught inside the processor (never raised to the host), by stage.",
                                     labels=("stage",))
        for stage, n in sorted(s["errors"].items()):
            errors.add_metric((stage,), n)
        yield errors
