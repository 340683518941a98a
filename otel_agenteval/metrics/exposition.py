"""Serving the metrics: ``/metrics`` over HTTP, text format or OpenMetrics by ``Accept``.

OpenMetrics is what carries exemplars (trace ids on the steps histogram and violations);
Prometheus asks for it first and keeps exemplars when started with
``--enable-feature=exemplar-storage``. Clients that do not ask get the classic text format.

Bound to 127.0.0.1 unless told otherwise. For an app that already has a web server,
mount :func:`wsgi_app` or :func:`asgi_app` at ``/metrics`` instead.

All three serve the registry through :class:`SafeRegistry`: whatever another collector in the
registry yields (a lone surrogate no encoder can write, a collector that raises), the scrape
still answers, with the bad text replaced and the broken collector left out and counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, make_asgi_app, make_wsgi_app, start_http_server
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar, Sample

from ..model.product_log import product_log
from .catalogue import SCRAPE_ERRORS

DEFAULT_PORT = 9464  # the OpenTelemetry Prometheus exporter's port
DEFAULT_ADDR = "127.0.0.1"


log = product_log()  # structlog as the app set it up; stderr when it did not
_warned: set[str] = set()


def _text(s: str) -> str:
    """``s`` as text every encoder can write (lone surrogates become U+FFFD)."""
    if s.isascii():
        return s
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in s)


def _clean_labels(labels: dict[str, str]) -> dict[str, str]:
    return {_text(str(k)): _text(str(v)) for k, v in labels.items()}


def _clean(metric: Metric) -> Metric:
    """``metric`` unchanged when every string in it encodes, else a copy with the bad text replaced."""
    strings = [metric.name, metric.documentation, metric.unit]
    for sample in metric.samples:
        strings.append(sample.name)
        strings.extend(sample.labels)
        strings.extend(sample.labels.values())
        if sample.exemplar is not None:
            strings.extend(sample.exemplar.labels)
            strings.extend(sample.exemplar.labels.values())
    if all(_text(x) is x for x in strings if isinstance(x, str)):
        return metric
    out = Metric(_text(metric.name), _text(metric.documentation), metric.type, _text(metric.unit))
    for sample in metric.samples:
        ex = sample.exemplar
        if ex is not None:
            ex = Exemplar(_clean_labels(ex.labels), ex.value, ex.timestamp)
        out.samples.append(Sample(_text(sample.name), _clean_labels(sample.labels), sample.value, sample.timestamp,
                                  ex, sample.native_histogram))
    return out


class SafeRegistry(Collector):
    """A registry as the endpoints serve it: every string encodable, a raising collector skipped.

    Each collector runs on its own (as :class:`~prometheus_client.CollectorRegistry` does, one
    after another); one that raises is left out of that scrape, logged and counted in
    ``agenteval_scrape_errors_total``, and the rest are served.
    """

    def __init__(self, registry: CollectorRegistry, names: Iterable[str] | None = None,
                 errors: list[int] | None = None) -> None:
        self._registry = registry
        self._names = None if names is None else frozenset(names)
        self._errors = [0] if errors is None else errors  # shared with the restricted views

    @property
    def errors(self) -> int:
        return self._errors[0]

    def restricted_registry(self, names: Iterable[str]) -> SafeRegistry:
        """The ``?name[]=`` filter of the endpoints (the registry's own method, kept safe)."""
        return SafeRegistry(self._registry, names, self._errors)

    def _collectors(self) -> list[Any]:
        found = getattr(self._registry, "_collector_to_names", None)  # CollectorRegistry's own map
        if not isinstance(found, dict):
            return [self._registry]
        with self._registry._lock:
            return list(found)

    def collect(self) -> Iterator[Metric]:
        names = self._names
        for m in self._collect():
            if names is None:
                yield m
                continue
            kept = [s for s in m.samples if s.name in names]
            if kept:
                out = Metric(m.name, m.documentation, m.type, m.unit)
                out.samples = kept
                yield out

    def _collect(self) -> Iterator[Metric]:
        target = getattr(self._registry, "_target_info_metric", None)
        if getattr(self._registry, "_target_info", None) and target is not None:
            yield _clean(target())
        for collector in self._collectors():
            try:
                metrics = [_clean(m) for m in collector.collect()]
            except Exception:
                self._errors[0] += 1
                name = type(collector).__name__
                if name not in _warned and len(_warned) < 64:  # once per kind of collector, not per scrape
                    _warned.add(name)
                    log.warning("agenteval.scrape: a collector raised; left out of the scrape", collector=name,
                                exc_info=True)
                continue
            yield from metrics
        yield CounterMetricFamily(SCRAPE_ERRORS.name, SCRAPE_ERRORS.doc, value=self._errors[0])


@dataclass
class MetricsServer:
    """A running ``/metrics`` server (a daemon thread); :meth:`close` stops it."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def addr(self) -> str:
        return str(self.server.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (useful after asking for port 0)."""
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    # ``serve`` used to return ``(server, thread)``; unpacking keeps working.
    def __iter__(self) -> Any:
        return iter((self.server, self.thread))


def serve(port: int = DEFAULT_PORT, addr: str = DEFAULT_ADDR, registry: CollectorRegistry | None = None, *,
          certfile: str | None = None, keyfile: str | None = None) -> MetricsServer:
    """Serve ``registry`` (default: the global one) on ``http://addr:port/metrics`` from a daemon thread.

    ``port=0`` picks a free port (see :attr:`MetricsServer.port`). ``certfile``/``keyfile``
    switch to HTTPS. Raises :class:`OSError` when the address cannot be bound.
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"invalid metrics port: {port} (0..65535)")
    server, thread = start_http_server(port, addr=addr, registry=_safe(registry), certfile=certfile, keyfile=keyfile)
    return MetricsServer(server, thread)


def wsgi_app(registry: CollectorRegistry | None = None) -> Any:
    """A WSGI app serving the metrics (mount it at ``/metrics``, e.g. with werkzeug's DispatcherMiddleware)."""
    return make_wsgi_app(_safe(registry))


def asgi_app(registry: CollectorRegistry | None = None) -> Any:
    """An ASGI app serving the metrics (e.g. ``app.mount("/metrics", asgi_app(registry))`` in Starlette/FastAPI)."""
    return make_asgi_app(_safe(registry))


def _safe(registry: CollectorRegistry | None) -> SafeRegistry:
    return SafeRegistry(REGISTRY if registry is None else registry)


__all__ = ["DEFAULT_ADDR", "DEFAULT_PORT", "MetricsServer", "SafeRegistry", "asgi_app", "serve", "wsgi_app"]
