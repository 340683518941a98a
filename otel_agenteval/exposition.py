"""Serving the metrics: ``/metrics`` over HTTP, text format or OpenMetrics by ``Accept``.

OpenMetrics is what carries exemplars (trace ids on the steps histogram and violations);
Prometheus asks for it first and keeps exemplars when started with
``--enable-feature=exemplar-storage``. Clients that do not ask get the classic text format.

Bound to 127.0.0.1 unless told otherwise. For an app that already has a web server,
mount :func:`wsgi_app` or :func:`asgi_app` at ``/metrics`` instead.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, make_asgi_app, make_wsgi_app, start_http_server

DEFAULT_PORT = 9464  # the OpenTelemetry Prometheus exporter's port
DEFAULT_ADDR = "127.0.0.1"


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
    server, thread = start_http_server(port, addr=addr, registry=REGISTRY if registry is None else registry,
                                       certfile=certfile, keyfile=keyfile)
    return MetricsServer(server, thread)


def wsgi_app(registry: CollectorRegistry | None = None) -> Any:
    """A WSGI app serving the metrics (mount it at ``/metrics``, e.g. with werkzeug's DispatcherMiddleware)."""
    return make_wsgi_app(REGISTRY if registry is None else registry)


def asgi_app(registry: CollectorRegistry | None = None) -> Any:
    """An ASGI app serving the metrics (e.g. ``app.mount("/metrics", asgi_app(registry))`` in Starlette/FastAPI)."""
    return make_asgi_app(REGISTRY if registry is None else registry)


__all__ = ["DEFAULT_ADDR", "DEFAULT_PORT", "MetricsServer", "asgi_app", "serve", "wsgi_app"]
