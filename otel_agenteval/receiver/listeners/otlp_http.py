"""OTLP/HTTP ``POST /v1/traces``, as an ASGI app (the ops endpoints are ``ops.py``).

Status codes as the OTLP/HTTP spec gives them: 200 with ``partial_success`` for unreadable spans,
400 for an unreadable body, 401 without the token, 408 for a body that does not arrive in time,
413 for a body (or its inflated form, or its span count) past the limits, 415 for another content
type or encoding (gzip and deflate are read), 429 when the ingest queue is full and 503 while shutting down, both with
``Retry-After``. Error bodies are a ``google.rpc.Status`` in the request's encoding.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from google.protobuf.json_format import MessageToJson  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..compression import CONTENT_ENCODINGS, TooLarge
from ..config import ServeConfig
from ..decoding import BadRequest, Decoded, from_json, from_protobuf
from ..durability import HTTP_JSON, HTTP_PROTOBUF
from ..memory import Reservation, span_bytes
from ..pipeline import CLOSED, FULL, OK, Pipeline
from .counts import ListenerCounts

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_T = TypeVar("_T")

log = logging.getLogger("otel_agenteval.serve")

OFFLOAD_BYTES = 4 << 20  # bodies past this (as inflated) are decoded and fed on a decoder thread
OFFLOAD_COMPRESSED_BYTES = 256 << 10  # ... and compressed bodies past this inflated there
DECODERS = 2  # those threads: decoding holds the GIL, so more would only take turns
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
        self._counts = ListenerCounts(pipeline.counters, "http")
        self._retry_after = str(config.retry_after_s).encode()
        self._decoders = ThreadPoolExecutor(DECODERS, thread_name_prefix="agenteval-decode")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await is_http(scope, receive, send):
            return
        held = Reservation(self.pipeline.memory)
        try:
            await self._export(scope, receive, send, held)
        finally:
            held.release()

    async def _export(self, scope: Scope, receive: Receive, send: Send, held: Reservation) -> None:
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
            raw = await self._body(headers, receive, held)
            inflater = CONTENT_ENCODINGS[encoding]  # a big compressed body is inflated off the event loop too
            body = raw if inflater is None else await self._call(len(raw) > OFFLOAD_COMPRESSED_BYTES, inflater, raw,
                                                                 self.config.max_body_bytes)
            if not held.grow(len(body) - len(raw)):
                raise self._memory_limited()  # not logged: the client sends it again
            # a big body is decoded and fed off the event loop: /healthz and other requests go on meanwhile
            big = len(body) > OFFLOAD_BYTES
            decoded = await self._call(big, _decode, body, json_body)
            # with --wal-dir: logged as received once decoded, acknowledged once synced
            logged = await self._call(big, self.pipeline.log, decoded.spans, HTTP_JSON if json_body else HTTP_PROTOBUF,
                                      encoding, raw)
            status = OK if logged is None else await asyncio.wrap_future(logged)
            response = await self._call(big, self._enqueue, decoded, len(body), status)
        except _Refused as r:
            self._counts.request(r.result)
            await _send(send, r.status, _status_body(r.status, str(r), json_body), json_body, r.headers)
            return
        except TooLarge as exc:
            self._counts.request("too_large")
            await _send(send, 413, _status_body(413, str(exc), json_body), json_body)
            return
        except BadRequest as exc:
            self._counts.request("bad_request")
            await _send(send, 400, _status_body(400, str(exc), json_body), json_body)
            return
        except Exception as exc:  # a body no reader foresaw: still the client's, never a 500
            log.exception("agenteval serve: unexpected error decoding a request")
            self.pipeline.counters.errors.labels("decode").inc()
            self._counts.request("bad_request")
            await _send(send, 400, _status_body(400, f"unreadable request: {type(exc).__name__}", json_body), json_body)
            return
        await _send(send, 200, _response_body(response, json_body), json_body)

    async def _call(self, off_loop: bool, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` here, or on a decoder thread when ``off_loop``."""
        if not off_loop:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._decoders, fn, *args)

    def close(self) -> None:
        self._decoders.shutdown(wait=False)

    def _authorise(self, header: bytes) -> None:
        assert self._token is not None
        if not bearer_ok(header, self._token):
            raise _Refused(401, "missing or wrong bearer token", "unauthorized", ((b"www-authenticate", b"Bearer"),))

    def _memory_limited(self) -> _Refused:
        return _Refused(429, "memory limit reached (--memory-limit-mib): retry later", "memory_limited",
                        ((b"retry-after", self._retry_after),))

    async def _body(self, headers: dict[bytes, bytes], receive: Receive, held: Reservation) -> bytes:
        limit = self.config.max_body_bytes
        header = headers.get(b"content-length", b"")
        length = int(header) if header.isdigit() else None
        if length is not None and length > limit:
            raise _Refused(413, f"body of {length} bytes is larger than {limit} bytes (--max-body-bytes)",
                           "too_large")
        if length is not None and not held.grow(length):
            raise self._memory_limited()  # before a byte of it is read
        grow = None if length is not None else held.grow  # chunked: reserved as it comes
        try:  # one deadline for the whole body (not one timer task per chunk)
            return await asyncio.wait_for(_chunks(receive, limit, grow, self._memory_limited),
                                          self.config.body_timeout_s)
        except asyncio.TimeoutError:
            raise _Refused(408, f"body not received within {self.config.body_timeout_s}s (--body-timeout)",
                           "timeout") from None

    def _enqueue(self, decoded: Decoded, body_bytes: int, logged: str = OK) -> ExportTraceServiceResponse | None:
        spans = decoded.spans
        limit = self.config.max_spans_per_request
        if len(spans) > limit:
            raise _Refused(413, f"{len(spans)} spans in one request, more than {limit} (--max-spans-per-request)",
                           "too_large")
        if spans:
            # not in the write-ahead log: refused
            got = self.pipeline.submit(spans, span_bytes(body_bytes, len(spans))) if logged == OK else FULL
            if got == FULL:
                self._counts.refused.inc(len(spans))
                raise _Refused(429, "ingest queue is full: retry later", "throttled",
                               ((b"retry-after", self._retry_after),))
            if got == CLOSED:
                self._counts.refused.inc(len(spans))
                raise _Refused(503, "shutting down: retry on another replica", "unavailable",
                               ((b"retry-after", self._retry_after),))
            self._counts.accepted.inc(len(spans))
        if not decoded.rejected:
            self._counts.ok.inc()
            return None
        self._counts.rejected.inc(decoded.rejected)
        self._counts.request("partial")
        response = ExportTraceServiceResponse()
        response.partial_success.rejected_spans = decoded.rejected
        response.partial_success.error_message = decoded.error_message
        return response


def _decode(body: bytes | bytearray, json_body: bool) -> Decoded:
    return from_json(body) if json_body else from_protobuf(body)


async def _chunks(receive: Receive, limit: int, grow: Callable[[int], bool] | None,
                  refused: Callable[[], _Refused]) -> bytes:
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
        if grow is not None and not grow(len(chunk)):
            raise refused()
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


async def is_http(scope: Scope, receive: Receive, send: Send) -> bool:
    """An HTTP request to answer? Lifespan messages are answered here; anything else is ignored."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
    return bool(scope["type"] == "http")


async def lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def bearer_ok(header: bytes, token: bytes) -> bool:
    scheme, _, given = header.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)
