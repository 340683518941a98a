"""The metrics through the user's ``MeterProvider``: one instrument per catalogue entry with an OTel name.

Counters and gauges are observable instruments whose callbacks read the same Prometheus families
the ``/metrics`` endpoint serves (one read of the registry per collection: the SDK calls the
callbacks in the order the instruments were made, and the first one reads), so nothing is counted twice and nothing is added to the span path. Histograms are
recorded as each run finishes (an ``on_finish`` sink, after the Prometheus one): the GenAI agent
metrics (``gen_ai.invoke_agent.*``, one ``gen_ai.execute_tool.duration`` per kept tool step) and
``agenteval.trajectory.cost``. Attributes are the Prometheus labels (safe, capped), renamed by
:func:`metric_catalogue.attribute`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import partial
from typing import Any

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider
from prometheus_client import CollectorRegistry

from ..model.trajectory import Trajectory
from ..reading.labels import safe_label
from .catalogue import CATALOGUE, Declared, attribute
from .exposition import SafeRegistry

INVOKE_AGENT = {"gen_ai.operation.name": "invoke_agent"}
EXECUTE_TOOL = {"gen_ai.operation.name": "execute_tool"}
ERROR = "_OTHER"  # error.type when the span says it failed but not how (the conventions' fallback)


class MetricsBridge:
    """Every catalogue entry with an ``otel`` name, on a meter of ``meter_provider``."""

    def __init__(self, metrics: Any, meter_provider: MeterProvider | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        from .. import __version__

        provider = meter_provider if meter_provider is not None else get_meter_provider()
        meter = provider.get_meter("otel_agenteval", __version__)
        self._metrics = metrics  # metrics.Metrics: its label makers (safe, capped, as Prometheus gets them)
        self._registry = SafeRegistry(registry if registry is not None else metrics.registry)
        self._lock = threading.Lock()
        self._samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        self._runs: list[tuple[Declared, Any]] = []
        self._steps: list[tuple[Declared, Any]] = []
        first = True
        for d in CATALOGUE:
            if not d.otel:
                continue
            if d.kind == "histogram":
                h = meter.create_histogram(d.otel, unit=d.unit, description=d.doc,
                                           explicit_bucket_boundaries_advisory=list(map(float, d.buckets)))
                (self._steps if d.value == "step_duration" else self._runs).append((d, h))
                continue
            observe = partial(self._observe, d, first)
            first = False
            if d.kind == "counter":
                meter.create_observable_counter(d.otel, [observe], unit=d.unit, description=d.doc)
            else:
                meter.create_observable_gauge(d.otel, [observe], unit=d.unit, description=d.doc)

    # --- counters and gauges: read from the Prometheus families --------------------------------
    def _observe(self, d: Declared, first: bool, options: CallbackOptions) -> Iterable[Observation]:
        sample = f"{d.name}_total" if d.kind == "counter" else d.name
        return [Observation(v, {attribute(k): x for k, x in labels.items()})
                for labels, v in self._snapshot(first).get(sample, ())]

    def _snapshot(self, fresh: bool) -> dict[str, list[tuple[dict[str, str], float]]]:
        with self._lock:
            if fresh:
                wanted = {f"{d.name}_total" if d.kind == "counter" else d.name for d in CATALOGUE if d.otel and d.name}
                samples: dict[str, list[tuple[dict[str, str], float]]] = {}
                for family in self._registry.collect():
                    for s in family.samples:
                        if s.name in wanted:
                            samples.setdefault(s.name, []).append((s.labels, s.value))
                self._samples = samples
            return self._samples

    # --- histograms: as a run finishes ---------------------------------------------------------
    def finished(self, t: Trajectory) -> None:
        service, agent = self._metrics.agent_label(t.service_name, t.agent_name, count=False)
        labels = {"service_name": service, "agent_name": agent, "outcome": t.outcome}
        failed = t.root is not None and not t.root.ok
        for d, h in self._runs:
            attrs = {attribute(k): labels[k] for k in d.labels if k in labels}
            if d.otel.startswith("gen_ai."):
                attrs.update(INVOKE_AGENT)
                if failed:
                    attrs["error.type"] = ERROR
            h.record(getattr(t, d.value), attrs)
        if not self._steps:
            return
        tool_label = self._metrics.tool_label
        for step in t.steps:
            attrs = {"gen_ai.agent.name": agent, "gen_ai.tool.name": tool_label(step.tool, False), **EXECUTE_TOOL}
            if not step.ok:
                attrs["error.type"] = safe_label(step.error_type, 64) if step.error_type else ERROR
            seconds = max(0, step.end_ns - step.start_ns) / 1e9
            for _, h in self._steps:
                h.record(seconds, attrs)
