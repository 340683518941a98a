"""Connection limits on every listener, with raw sockets on loopback: idle connections closed,
slow senders cut off, a flood never locks out /healthz or an honest exporter, each close counted."""

from __future__ import annotations

import resource
import socket
import time

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_support import get, scrape, settled, value, wait_until
from test_serve_input import _spans


@pytest.fixture
def receiver(started_receivers):
    return started_receivers


def _connect(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        out.append(s)
    return out


def _closed_by_server(s: socket.socket, within: float) -> bool:
    """True when the server closes ``s`` (EOF or reset) within ``within`` seconds."""
    s.settimeout(within)
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _closed(r, listener: str, reason: str) -> float:
    return value(scrape(r.ports.metrics), "agenteval_receiver_connections_closed_total", listener=listener,
                 reason=reason)


def test_idle_connections_are_closed_on_every_listener(receiver):
    r = receiver(http_idle_s=0.5, http_read_s=5)
    silent = _connect(r.ports.http, 10) + _connect(r.ports.metrics, 10)
    grpc_silent = _connect(r.ports.grpc, 3)
    # a keep-alive connection after one request
    kept = socket.create_connection(("127.0.0.1", r.ports.metrics), timeout=5)
    kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert kept.recv(4096).startswith(b"HTTP/1.1 200")
    try:
        for s in [*silent, kept]:
            assert _closed_by_server(s, 3), "an idle connection was left open"
        assert _closed(r, "otlp_http", "idle") == 10
        assert _closed(r, "ops", "idle") == 11
    finally:
        for s in [*silent, kept, *grpc_silent]:
            s.close()


def test_a_silent_grpc_connection_is_closed_after_the_read_timeout(receiver):
    r = receiver(http_idle_s=5, http_read_s=0.5)
    s = socket.create_connection(("127.0.0.1", r.ports.grpc), timeout=5)
    try:
        assert _closed_by_server(s, 5)
    finally:
        s.close()


@pytest.mark.parametrize("listener", ["otlp_http", "ops"])
def test_a_byte_a_second_sender_is_cut_off(receiver, listener):
    r = receiver(http_idle_s=5, http_read_s=0.6)
    port = r.ports.http if listener == "otlp_http" else r.ports.metrics
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    request = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
    t0 = time.monotonic()
    try:
        for b in request:
            try:
                s.sendall(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                break
            if _closed_by_server(s, 0.1):
                break
        took = time.monotonic() - t0
        assert took < 2.5, f"a slow sender kept its connection {took:.1f}s"
        assert _closed(r, listener, "read_timeout") == 1
    finally:
        s.close()


def test_a_flood_of_connections_never_locks_out_healthz_or_an_honest_exporter(receiver):
    r = receiver(max_connections=20, http_idle_s=30, http_read_s=30)
    flood = _connect(r.ports.metrics, 60) + _connect(r.ports.http, 60)
    time.sleep(0.2)
    try:
        t0 = time.monotonic()
        status, _ = get(f"http://127.0.0.1:{r.ports.metrics}/healthz", timeout=5)
        assert status == 200 and time.monotonic() - t0 < 1.0
        exporter = HttpExporter(endpoint=f"http://127.0.0.1:{r.ports.http}/v1/traces", timeout=5)
        assert exporter.export(_spans()).name == "SUCCESS"
        exporter.shutdown()
        wait_until(settled(r.ports.metrics, 1), what="the honest spans played")
        assert _closed(r, "ops", "evicted") >= 40
        assert _closed(r, "otlp_http", "evicted") >= 40
        open_flood = sum(1 for s in flood if not _closed_by_server(s, 0.01))
        assert open_flood <= 40  # at most the limit on each listener
    finally:
        for s in flood:
            s.close()


_REQUESTS = {"ops": b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
             "otlp_http": b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                          b"Content-Length: 0\r\n\r\n"}


@pytest.mark.parametrize("listener", ["otlp_http", "ops"])
def test_a_flood_of_new_connections_does_not_cut_off_a_kept_alive_one(receiver, listener):
    # the kept-alive connection is the one idle the longest when the flood comes: it used to be
    # the first evicted; connections that never sent a request go first now
    r = receiver(max_connections=10, http_idle_s=30, http_read_s=30)
    port = r.ports.http if listener == "otlp_http" else r.ports.metrics
    kept = socket.create_connection(("127.0.0.1", port), timeout=5)
    flood: list[socket.socket] = []
    try:
        kept.sendall(_REQUESTS[listener])
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(0.1)
        flood = _connect(port, 40)
        wait_until(lambda: _closed(r, listener, "evicted") >= 31, what="the flood evicting itself")
        kept.sendall(_REQUESTS[listener])
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        for s in [kept, *flood]:
            s.close()


def test_when_every_connection_is_busy_a_new_one_gets_503(receiver):
    r = receiver(max_connections=4, http_idle_s=30, http_read_s=30, body_timeout_s=30)
    busy = _connect(r.ports.http, 4)
    for s in busy:  # headers in full, the body never: a request in progress
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                  b"Content-Length: 1000\r\n\r\n")
    time.sleep(0.2)
    extra = socket.create_connection(("127.0.0.1", r.ports.http), timeout=5)
    try:
        assert extra.recv(4096).startswith(b"HTTP/1.1 503")
        assert _closed(r, "otlp_http", "refused") == 1
    finally:
        for s in [*busy, extra]:
            s.close()


def test_grpc_exporter_is_served_with_the_limits_set(receiver):
    r = receiver(max_connections=8, http_idle_s=1, http_read_s=1)
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{r.ports.grpc}", insecure=True, timeout=5)
    assert exporter.export(_spans()).name == "SUCCESS"
    exporter.shutdown()
    wait_until(settled(r.ports.metrics, 1), what="the gRPC spans played")


def test_the_descriptor_limit_is_shared_by_the_listeners_that_are_on():
    from otel_agenteval.receiver import ServeConfig

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:  # 1024 less 100 kept for grpcio, logs, the policy and the WAL
        assert ServeConfig().connection_limit == 308  # metrics, OTLP/HTTP, OTLP/gRPC
        assert ServeConfig(grpc_port=-1).connection_limit == 462
        assert ServeConfig(grpc_port=-1, max_connections=50).connection_limit == 50
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
