"""What the safety benchmarks share: a provider wired as an app would wire it, RSS, scrapes."""

from __future__ import annotations

import contextlib
import logging
import resource
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.metrics.exposition import serve

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


class NoopExporter(SpanExporter):
    """Counts what the BatchSpanProcessor hands it, keeps nothing."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@dataclass
class App:
    provider: TracerProvider
    processor: TrajectoryProcessor | None
    registry: CollectorRegistry
    exporter: NoopExporter


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No log line per violation or per rejected attribute (a fuzz run makes millions); restored after."""
    otel = logging.getLogger("opentelemetry")
    level, config = otel.level, structlog.get_config()
    otel.setLevel(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        yield
    finally:
        otel.setLevel(level)
        structlog.configure(**config)


def make_app(policy: Policy | None = None, *, agenteval: bool = True, service: str = "bench",
             **processor_kwargs: Any) -> App:
    """A TracerProvider with a BatchSpanProcessor (no-op exporter), then a TrajectoryProcessor."""
    registry = CollectorRegistry()
    exporter = NoopExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    processor = None
    if agenteval:
        processor = TrajectoryProcessor(policy, registry=registry, **processor_kwargs)
        provider.add_span_processor(processor)
    return App(provider, processor, registry, exporter)


def rss_mb() -> float:
    """Resident set size now, MB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KB on Linux


@dataclass
class Scrape:
    text_bytes: int
    text_s: float
    openmetrics_bytes: int
    openmetrics_s: float
    families: int
    samples: int


def scrape(registry: CollectorRegistry) -> Scrape:
    """``/metrics`` over real HTTP on loopback, both formats, each body parsed back (raises if not clean)."""
    server = serve(0, registry=registry)
    try:
        out: list[Any] = []
        for accept in (None, OPENMETRICS):
            req = urllib.request.Request(server.url, headers={"Accept": accept} if accept else {})
            t0 = time.perf_counter()
            with urllib.request.urlopen(req, timeout=120) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"/metrics answered {resp.status}")
                body = resp.read().decode("utf-8")  # strict
            out.append((len(body), time.perf_counter() - t0, body))
        families = list(parse_text(out[0][2]))
        om_families = list(parse_openmetrics(out[1][2]))
        lost = {f.name for f in families if not f.name.endswith("_created")} - {f.name for f in om_families}
        if lost:  # (the text format gives each counter's _created series a family of its own)
            raise RuntimeError(f"OpenMetrics body lost families: {sorted(lost)[:5]}")
        return Scrape(out[0][0], out[0][1], out[1][0], out[1][1], len(families),
                      sum(len(f.samples) for f in families))
    finally:
        server.close()


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def by_label(registry: CollectorRegistry, family: str, label: str) -> dict[str, float]:
    """``{label value: value}`` of a counter family (its ``_total`` samples)."""
    out: dict[str, float] = {}
    for m in registry.collect():
        if m.name == family:
            for s in m.samples:
                if s.name.endswith("_total"):
                    key = s.labels.get(label, "")
                    out[key] = out.get(key, 0.0) + s.value
    return out
