"""OTLP/gRPC ``TraceService/Export`` (opentelemetry-proto's service, on grpcio).

The request arrives as bytes, as the client sent it: grpcio's own per-message decompression is
off, and a gzip or deflate message is inflated here (zlib-ng, ~3x zlib's speed; bounded by
``--max-body-bytes``: :func:`~.compression.grpc_message`). An unreadable request is
answered ``INVALID_ARGUMENT`` and counted, not refused inside grpcio, and is decoded by replay's
decoder. A full ingest queue answers
``RESOURCE_EXHAUSTED`` with a ``google.rpc.RetryInfo`` (in ``grpc-status-details-bin``, where the
Collector reads it, and in ``google.rpc.retryinfo-bin``, where the Python SDK does): both retry
after the delay. Shutting down answers ``UNAVAILABLE``; a wrong token ``UNAUTHENTICATED``.
"""

from __future__ import annotations

import hmac
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import grpc  # type: ignore[import-untyped]
from google.protobuf.any_pb2 import Any as AnyProto  # type: ignore[import-untyped]
from google.protobuf.duration_pb2 import Duration  # type: ignore[import-untyped]
from google.rpc.error_details_pb2 import RetryInfo  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..compression import TooLarge, grpc_message
from ..config import ServeConfig
from ..decoding import BadRequest, from_protobuf
from ..durability import GRPC
from ..memory import Reservation, span_bytes
from ..pipeline import CLOSED, FULL, OK, Pipeline
from .counts import ListenerCounts

log = logging.getLogger("otel_agenteval.serve")

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
MAX_IN_FLIGHT = 256  # requests received and waiting for a handler; past it grpcio refuses (RESOURCE_EXHAUSTED)


class _Status(NamedTuple):  # grpc.Status: what abort_with_status takes
    code: Any
    details: str
    trailing_metadata: tuple[tuple[str, bytes], ...]


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    def __init__(self, pipeline: Pipeline, config: ServeConfig) -> None:
        self.pipeline = pipeline
        self.config = config
        self._token = config.token.encode() if config.token is not None else None
        self._counts = ListenerCounts(pipeline.counters, "grpc")
        self._throttled = _retry_later("ingest queue is full: retry later", config.retry_after_s)
        self._memory_limited = _retry_later("memory limit reached (--memory-limit-mib): retry later",
                                            config.retry_after_s)

    def export_stream(self, requests: Any, context: Any) -> ExportTraceServiceResponse:
        """The RPC as grpcio hands it over: the one message is taken here, so a message grpcio
        refused (past ``grpc.max_receive_message_length``, 2 x --max-body-bytes) is seen and counted
        (``result="not_received"``), where a unary handler is never called for it."""
        try:
            request = next(requests)
        except (StopIteration, grpc.RpcError):  # refused by grpcio's size limit, or cancelled first
            self._counts.request("not_received")
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"message not received: larger than {2 * self.config.max_body_bytes} bytes, or cancelled")
        return self.Export(request, context)

    def Export(self, request: bytes, context: Any) -> ExportTraceServiceResponse:  # noqa: N802 - the RPC's name
        if self._token is not None:
            header = ""
            for key, value in context.invocation_metadata():
                if key == "authorization":
                    header = value
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._token):
                self._counts.request("unauthorized")
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        if len(request) > self.config.max_body_bytes:
            self._counts.request("too_large")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"message of {len(request)} bytes is larger than {self.config.max_body_bytes} (--max-body-bytes)")
        held = Reservation(self.pipeline.memory)
        try:
            return self._export(request, context, held)
        finally:
            held.release()

    def _export(self, request: bytes, context: Any, held: Reservation) -> ExportTraceServiceResponse:
        if not held.grow(len(request)):
            self._counts.request("memory_limited")
            context.abort_with_status(self._memory_limited)
        try:
            message = grpc_message(request, self.config.max_body_bytes)
            roomy = held.grow(len(message) - len(request))  # inflated: its bytes too
            decoded = from_protobuf(message) if roomy else None
        except TooLarge as exc:
            self._counts.request("too_large")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except BadRequest as exc:
            self._counts.request("bad_request")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Exception as exc:  # a message no reader foresaw: still the client's
            log.exception("agenteval serve: unexpected error decoding a gRPC request")
            self.pipeline.counters.errors.labels("decode").inc()
            self._counts.request("bad_request")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unreadable request: {type(exc).__name__}")
        if decoded is None:
            self._counts.request("memory_limited")
            context.abort_with_status(self._memory_limited)
        assert decoded is not None  # abort_with_status raised
        spans = decoded.spans
        limit = self.config.max_spans_per_request
        if len(spans) > limit:
            self._counts.request("too_large")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"{len(spans)} spans in one request, more than {limit} (--max-spans-per-request)")
        if spans:
            logged = self.pipeline.log(spans, GRPC, b"", request)  # with --wal-dir: synced first
            nbytes = span_bytes(len(message), len(spans))
            got = self.pipeline.submit(spans, nbytes) if logged is None or logged.result() == OK else FULL
            if got == FULL:
                self._counts.refused.inc(len(spans))
                self._counts.request("throttled")
                context.abort_with_status(self._throttled)
            if got == CLOSED:
                self._counts.refused.inc(len(spans))
                self._counts.request("unavailable")
                context.abort(grpc.StatusCode.UNAVAILABLE, "shutting down: retry on another replica")
            self._counts.accepted.inc(len(spans))
        response = ExportTraceServiceResponse()
        if decoded.rejected:
            self._counts.rejected.inc(decoded.rejected)
            self._counts.request("partial")
            response.partial_success.rejected_spans = decoded.rejected
            response.partial_success.error_message = decoded.error_message
        else:
            self._counts.ok.inc()
        return response


def _retry_later(message: str, delay_s: int) -> _Status:
    """``RESOURCE_EXHAUSTED`` with a ``RetryInfo``, where the Collector and the Python SDK read it."""
    info = RetryInfo(retry_delay=Duration(seconds=delay_s))
    detail = AnyProto()
    detail.Pack(info)
    return _Status(grpc.StatusCode.RESOURCE_EXHAUSTED, message, (
        ("grpc-status-details-bin", Status(code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], message=message,
                                           details=[detail]).SerializeToString()),
        ("google.rpc.retryinfo-bin", info.SerializeToString())))


def start_grpc(pipeline: Pipeline, config: ServeConfig, port: int) -> tuple[Any, int]:
    """A started grpcio server on ``config.addr:port`` (0: a free port); returns (server, bound port)."""
    service = TraceService(pipeline, config)
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        # a client's unary call, taken as a stream of one message: see TraceService.export_stream
        "Export": grpc.stream_unary_rpc_method_handler(
            service.export_stream, request_deserializer=None,  # bytes: decoded by replay's decoder
            response_serializer=ExportTraceServiceResponse.SerializeToString),
    })
    server = grpc.server(
        ThreadPoolExecutor(max_workers=config.grpc_workers, thread_name_prefix="agenteval-grpc"),
        handlers=(handler,),
        options=[("grpc.max_receive_message_length", 2 * config.max_body_bytes),
                 ("grpc.per_message_decompression", 0),  # inflated by the handler: grpc_message
                 ("grpc.so_reuseport", 0),
                 # the HTTP listeners' limits (connections.py), as grpcio's core takes them
                 ("grpc.max_connection_idle_ms", int(config.http_idle_s * 1000)),
                 ("grpc.server_handshake_timeout_ms", int(config.http_read_s * 1000)),
                 ("grpc.max_allowed_incoming_connections", config.connection_limit)],
        maximum_concurrent_rpcs=MAX_IN_FLIGHT,
    )
    host = f"[{config.addr}]" if ":" in config.addr else config.addr
    if config.tls:
        assert config.tls_cert is not None and config.tls_key is not None
        with open(config.tls_key, "rb") as k, open(config.tls_cert, "rb") as c:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        bound = server.add_secure_port(f"{host}:{port}", creds)
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}")
    server.start()
    return server, bound
