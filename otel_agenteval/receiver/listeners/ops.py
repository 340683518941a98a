"""The ops listener's endpoints (``/metrics``, ``/healthz``, ``/readyz``), as an ASGI app on an event
loop of its own, so a flood on the OTLP listeners never delays a probe or a scrape."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, make_asgi_app

from .otlp_http import Receive, Scope, Send, bearer_ok, is_http


class OpsApp:
    """``/metrics`` (text or OpenMetrics by ``Accept``), ``/healthz`` (live), ``/readyz`` (ready).
    With a ``token``, ``/metrics`` needs ``Authorization: Bearer <token>`` (what Prometheus'
    ``authorization`` sends); the probes stay open (they say nothing but up or ready)."""

    def __init__(self, registry: CollectorRegistry, readiness: Callable[[], list[str]],
                 token: str | None = None, unauthorized: Any = None) -> None:
        self._metrics = make_asgi_app(registry)
        self._readiness = readiness
        self._token = token.encode() if token is not None else None
        self._unauthorized = unauthorized  # a Counter child, counted per refused scrape

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await is_http(scope, receive, send):
            return
        path = scope["path"]
        if path == "/metrics":
            if self._token is not None and not bearer_ok(dict(scope["headers"]).get(b"authorization", b""),
                                                          self._token):
                if self._unauthorized is not None:
                    self._unauthorized.inc()
                await _plain(send, 401, {"error": "missing or wrong bearer token"},
                             ((b"www-authenticate", b"Bearer"),))
                return
            await self._metrics(scope, receive, send)
            return
        if path == "/healthz":
            await _plain(send, 200, {"status": "ok"})
        elif path == "/readyz":
            problems = self._readiness()
            await _plain(send, 503 if problems else 200,
                         {"status": "not ready", "problems": problems} if problems else {"status": "ready"})
        else:
            await _plain(send, 404, {"error": "not found: try /metrics, /healthz or /readyz"})



async def _plain(send: Send, status: int, doc: dict[str, Any], headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
