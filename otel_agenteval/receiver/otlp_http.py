"""OTLP/HTTP ``POST /v1/traces`` and the ops endpoints (``/metrics``, ``/healthz``, ``/readyz``), as ASGI apps.

Status codes as the OTLP/HTTP spec gives them: 200 with ``partial_success`` for unreadable spans,
400 for an unreadable body, 401 without the token, 408 for a body that does not arrive in time,
413 for a body (or its inflated form, or its span count) past the limits, 415 for another content
type or encoding (gzip and deflate are read), 429 when the ingest queue is full and 503 while shutting down, both with
``Retry-After``. Error bodies are a ``google.rpc.Status`` in the request's encoding.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf.json_format import MessageToJson  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from prometheus_client import CollectorRegistry, make_asgi_app

from .compression import CONTENT_ENCODINGS, TooLarge
from .config import ServeConfig
from .decoding import BadRequest, Decoded, from_json, from_protobuf
from .durability import HTTP_JSON, HTTP_PROTOBUF
from .pipeline import CLOSED, FULL, OK, Pipeline

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_GRPC_CODE = {400: 3, 401: 16, 408: 4, 413: 8, 415: 3, 429: 8, 503: 14, 404: 5, 405: 12}  # google.rpc.Code


class _Refused(Exception):
    def __init__(self, status: int, message: str, result: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.result = result
        self.headers = headers


class OtlpHttpApp:
    """``POST /v1/traces``: decode, validate, submit to the pipeline (which may play it here)."""

    def __init__(self, pipeline: Pipeline, config: ServeConfig) -> None:
        self.pipeline = pipeline
        self.config = config
        self._token = config.token.encode() if config.token is not None else None
        c = pipeline.counters
        self._requests = c.requests
        self._accepted = c.spans.labels("http", "accepted")
        self._rejected = c.spans.labels("http", "rejected")
        self._refused = c.spans.labels("http", "refused")
        self._ok = c.requests.labels("http", "ok")
        self._retry_after = str(config.retry_after_s).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        json_body = False
        try:
            if scope["path"] != "/v1/traces":
                raise _Refused(404, f"no such path {scope['path'][:100]!r}: OTLP/HTTP traces go to /v1/traces",
                               "not_found")
            if scope["method"] != "POST":
                raise _Refused(405, "use POST", "method_not_allowed", ((b"allow", b"POST"),))
            headers = dict(scope["headers"])
            ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower().decode("latin-1")
            json_body = ctype == JSON
            if self._token is not None:
                self._authorise(headers.get(b"authorization", b""))
            if ctype not in (PROTOBUF, JSON):
                raise _Refused(415, f"unsupported Content-Type {ctype!r}: use {PROTOBUF} or {JSON}",
                               "unsupported_media_type")
            encoding = headers.get(b"content-encoding", b"identity").strip().lower()
            if encoding not in CONTENT_ENCODINGS:
                raise _Refused(415, f"unsupported Content-Encoding {encoding.decode('latin-1')!r}: use gzip, deflate "
                               "or none", "unsupported_media_type")
            raw = await self._body(headers, receive)
            inflater = CONTENT_ENCODINGS[encoding]
            body = raw if inflater is None else inflater(raw, self.config.max_body_bytes)
            decoded = from_json(body) if json_body else from_protobuf(body)
            logged = self.pipeline.log(decoded.spans, HTTP_JSON if json_body else HTTP_PROTOBUF, encoding, raw)
            response = self._enqueue(decoded, OK if logged is None else await asyncio.wrap_future(logged))
        except _Refused as r:
            self._requests.labels("http", r.result).inc()
            await _send(send, r.status, _status_body(r.status, str(r), json_body), json_body, r.headers)
            return
        except TooLarge as exc:
            self._requests.labels("http", "too_large").inc()
            await _send(send, 413, _status_body(413, str(exc), json_body), json_body)
            return
        except BadRequest as exc:
            self._requests.labels("http", "bad_request").inc()
            await _send(send, 400, _status_body(400, str(exc), json_body), json_body)
            return
        await _send(send, 200, _response_body(response, json_body), json_body)

    def _authorise(self, header: bytes) -> None:
        scheme, _, token = header.partition(b" ")
        assert self._token is not None
        if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self._token):
            raise _Refused(401, "missing or wrong bearer token", "unauthorized", ((b"www-authenticate", b"Bearer"),))

    async def _body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes:
        limit = self.config.max_body_bytes
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise _Refused(413, f"body of {int(length)} bytes is larger than {limit} bytes (--max-body-bytes)",
                           "too_large")
        try:  # one deadline for the whole body (not one timer task per chunk)
            return await asyncio.wait_for(_chunks(receive, limit), self.config.body_timeout_s)
        except asyncio.TimeoutError:
            raise _Refused(408, f"body not received within {self.config.body_timeout_s}s (--body-timeout)",
                           "timeout") from None

    def _enqueue(self, decoded: Decoded, logged: str = OK) -> ExportTraceServiceResponse | None:
        spans = decoded.spans
        limit = self.config.max_spans_per_request
        if len(spans) > limit:
            raise _Refused(413, f"{len(spans)} spans in one request, more than {limit} (--max-spans-per-request)",
                           "too_large")
        if spans:
            got = self.pipeline.submit(spans) if logged == OK else FULL  # not in the write-ahead log: refused
            if got == FULL:
                self._refused.inc(len(spans))
                raise _Refused(429, "ingest queue is full: retry later", "throttled",
                               ((b"retry-after", self._retry_after),))
            if got == CLOSED:
                self._refused.inc(len(spans))
                raise _Refused(503, "shutting down: retry on another replica", "unavailable",
                               ((b"retry-after", self._retry_after),))
            self._accepted.inc(len(spans))
        if not decoded.rejected:
            self._ok.inc()
            return None
        self._rejected.inc(decoded.rejected)
        self._requests.labels("http", "partial").inc()
        response = ExportTraceServiceResponse()
        response.partial_success.rejected_spans = decoded.rejected
        response.partial_success.error_message = decoded.error_message
        return response


async def _chunks(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Refused(400, "client went away before the body ended", "disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _Refused(413, f"body is larger than {limit} bytes (--max-body-bytes)", "too_large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _status_body(status: int, message: str, json_body: bool) -> bytes:
    st = Status(code=_GRPC_CODE.get(status, 2), message=message)
    return MessageToJson(st, indent=None).encode() if json_body else st.SerializeToString()


def _response_body(response: ExportTraceServiceResponse | None, json_body: bool) -> bytes:
    if response is None:
        return b"{}" if json_body else b""
    return MessageToJson(response, indent=None).encode() if json_body else response.SerializeToString()


async def _send(send: Send, status: int, body: bytes, json_body: bool,
                headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    ctype = JSON if json_body else PROTOBUF
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class OpsApp:
    """``/metrics`` (text or OpenMetrics by ``Accept``), ``/healthz`` (live), ``/readyz`` (ready)."""

    def __init__(self, registry: CollectorRegistry, readiness: Callable[[], list[str]]) -> None:
        self._metrics = make_asgi_app(registry)
        self._readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/metrics":
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


async def _plain(send: Send, status: int, doc: dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
