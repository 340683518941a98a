"""Serving the metrics: ``/metrics`` over HTTP, text format or OpenMetrics by ``Accept``.

OpenMetrics is what carries exemplars (trace ids on the steps histogram and violations).
Bound to 127.0.0.1 unless told otherwise. For an app that already has a web server,
mount :func:`wsgi_app` or :func:`asgi_app` instead.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, make_asgi_app, make_wsgi_app, start_http_server


def serve(port: int = 9464, addr: str = "127.0.0.1", registry: CollectorRegistry | None = None) -> Any:
    """Start a daemon thread serving ``/metrics``; returns ``(server, thread)``."""
    return start_http_server(port, addr=addr, registry=REGISTRY if registry is None else registry)


def wsgi_app(registry: CollectorRegistry | None = None) -> Any:
    return make_wsgi_app(REGISTRY if registry is None else registry)


def asgi_app(registry: CollectorRegistry | None = None) -> Any:
    return make_asgi_app(REGISTRY if registry is None else registry)
