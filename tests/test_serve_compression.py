"""Compressed requests: gzip over HTTP, gzip and deflate over gRPC (the Collector's otlp exporter
sends gzip by default), inflated by serve with a bound, whichever inflater is installed."""

from __future__ import annotations

import gzip
import sys
import zlib
from pathlib import Path

import grpc
import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from prometheus_client import CollectorRegistry
from serve_support import post, scrape, settled, value, wait_until
from test_serve_input import _body, _spans

from otel_agenteval.receiver import Receiver, ServeConfig, compression
from otel_agenteval.receiver.compression import BadRequest, TooLarge, grpc_message, gunzip, inflate

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
GOOD = _body(_spans(2))


@pytest.fixture(params=["libdeflate", "zlib-ng", "zlib"])
def inflater(request, monkeypatch):
    """Every inflater: libdeflate for whole gzip bodies, then zlib-ng (both the serve extra), and
    the standard library's zlib (installed without it)."""
    assert compression.WHOLE is not None and compression.INFLATER is not zlib  # both in the test extra
    if request.param != "libdeflate":
        monkeypatch.setattr(compression, "WHOLE", None)
    if request.param == "zlib":
        monkeypatch.setattr(compression, "INFLATER", zlib)
    return request.param


def test_grpc_messages_are_inflated_when_compressed_and_taken_as_sent_otherwise(inflater):
    assert grpc_message(gzip.compress(GOOD), 1 << 20) == GOOD
    assert grpc_message(zlib.compress(GOOD), 1 << 20) == GOOD  # gRPC's deflate is the zlib format
    assert grpc_message(GOOD, 1 << 20) is GOOD
    looks_like_zlib = b"\x78\x01" + GOOD  # field 15 (unknown, varint 1) first: a valid message
    assert grpc_message(looks_like_zlib, 1 << 20) is looks_like_zlib
    with pytest.raises(TooLarge, match="gunzipped body is larger than 1024 bytes"):
        grpc_message(gzip.compress(b"\x0a\x00" * 10_000), 1024)
    with pytest.raises(TooLarge, match="inflated body is larger than 1024 bytes"):
        grpc_message(zlib.compress(b"\x0a\x00" * 10_000), 1024)
    with pytest.raises(BadRequest, match="truncated"):
        gunzip(gzip.compress(GOOD)[:-12], 1 << 20)
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert inflate(zlib.compress(GOOD), 1 << 20) == GOOD == inflate(raw.compress(GOOD) + raw.flush(), 1 << 20)
    with pytest.raises(BadRequest, match="not valid gzip"):
        grpc_message(b"\x1f\x8b but no gzip stream", 1 << 20)


def test_gzip_bodies_of_several_members_are_read_whole_and_bounded(inflater):
    """RFC 1952 lets a gzip body be several members (Go's reader takes them as one stream): none
    is dropped, even when the first and last are the same size, and the bound is on the total."""
    first, second = GOOD[: len(GOOD) // 2], GOOD[len(GOOD) // 2:]
    assert gunzip(gzip.compress(first) + gzip.compress(second), 1 << 20) == GOOD
    same_size = bytes(reversed(first))
    assert gunzip(gzip.compress(first) + gzip.compress(same_size), 1 << 20) == first + same_size
    with pytest.raises(TooLarge):
        gunzip(gzip.compress(b"\x0a\x00" * 400) + gzip.compress(b"\x0a\x00" * 400), 1024)
    with pytest.raises(BadRequest, match="bytes after the end of the gzip stream"):
        gunzip(gzip.compress(GOOD) + b"trailing", 1 << 20)
    with pytest.raises(BadRequest, match="truncated"):
        gunzip(gzip.compress(first) + gzip.compress(second)[:-12], 1 << 20)


def test_a_one_member_gzip_body_is_inflated_whole_by_libdeflate():
    body = gzip.compress(GOOD)
    assert compression._whole(body, 1 << 20) == GOOD  # the usual request: one call, no stream
    assert compression._whole(body, len(GOOD) - 1) is None  # states more than the bound: streamed
    assert compression._whole(gzip.compress(GOOD) + gzip.compress(GOOD), 1 << 20) is None  # two members


def test_a_gzip_trailer_that_lies_about_the_size_takes_the_bounded_path(inflater):
    """The whole-body path allocates what the trailer states: a trailer that says less than the
    body holds (a bomb), or nothing, or more than the limit, is read by the bounded path instead."""
    bomb = bytearray(gzip.compress(b"\x0a\x00" * 100_000))
    bomb[-4:] = (100).to_bytes(4, "little")  # says 100 bytes: inflating finds 200,000
    with pytest.raises(TooLarge):
        gunzip(bytes(bomb), 1024)
    zero = bytearray(gzip.compress(GOOD))
    zero[-4:] = bytes(4)  # says empty: not taken as an empty body
    with pytest.raises(BadRequest):
        gunzip(bytes(zero), 1 << 20)
    with pytest.raises(TooLarge):
        gunzip(gzip.compress(b"\x0a\x00" * 10_000), 1024)


@pytest.fixture
def receiver():
    cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0, grace_s=0.1, idle_s=1.0, log_violations=False,
                      max_body_bytes=64 * 1024)
    r = Receiver(cfg, registry=CollectorRegistry()).start()
    yield r
    r.stop()


def _export(r: Receiver, body: bytes, how: grpc.Compression) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}", compression=how) as channel:
        channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)(body, timeout=10)


def test_bad_compressed_grpc_requests_get_invalid_argument_and_a_counter(receiver):
    r = receiver
    bomb = b"\x0a\x00" * 100_000  # 200 KB of empty resource spans, past the 64 KiB bound once inflated
    cases = [
        (gzip.compress(GOOD)[:-12], grpc.Compression.NoCompression, "bad_request", "truncated"),
        (b"\x1f\x8b not gzip", grpc.Compression.NoCompression, "bad_request", "not valid gzip"),
        (bomb, grpc.Compression.Gzip, "too_large", "gunzipped body is larger than 65536 bytes (--max-body-bytes)"),
        (bomb, grpc.Compression.Deflate, "too_large", "inflated body is larger than 65536 bytes (--max-body-bytes)"),
    ]
    for body, how, result, says in cases:
        before = value(scrape(r.ports.metrics), "agenteval_receiver_requests_total", protocol="grpc", result=result)
        with pytest.raises(grpc.RpcError) as err:
            _export(r, body, how)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and says in err.value.details(), says
        after = value(scrape(r.ports.metrics), "agenteval_receiver_requests_total", protocol="grpc", result=result)
        assert after == before + 1, result
    for how in (grpc.Compression.Gzip, grpc.Compression.Deflate, grpc.Compression.NoCompression):
        _export(r, _body(_spans(1)), how)  # the next good ones are served, however they come
    wait_until(settled(r.ports.metrics, 3), what="the good requests played")


@pytest.mark.parametrize("path", ["libdeflate", "zlib-ng"])
def test_gzip_http_bodies_protobuf_and_json_are_read_whichever_path_inflates_them(receiver, monkeypatch, path):
    """Over OTLP/HTTP: a one-member gzip body (libdeflate's buffer, or zlib-ng's stream without
    it), JSON and protobuf alike, and a body of two gzip members: every span is read."""
    if path == "zlib-ng":
        monkeypatch.setattr(compression, "WHOLE", None)
    url = f"http://127.0.0.1:{receiver.ports.http}/v1/traces"
    gz = {"Content-Encoding": "gzip"}
    as_json = MessageToJson(encode_spans(_spans(2)), indent=None).encode()
    one, two = _body(_spans(1)), _body(_spans(2))
    for body, ctype in ((gzip.compress(_body(_spans(3))), "application/x-protobuf"),
                        (gzip.compress(as_json), "application/json"),
                        (gzip.compress(one) + gzip.compress(two), "application/x-protobuf")):
        status, _, answer = post(url, body, {"Content-Type": ctype, **gz})
        assert status == 200, answer
    wait_until(settled(receiver.ports.metrics, 8), what="3 + 2 + (1 + 2) runs played")
    s = scrape(receiver.ports.metrics)
    assert value(s, "agenteval_receiver_requests_total", protocol="http", result="ok") == 3
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="rejected") == 0


def test_grpc_messages_gzipped_by_a_client_other_than_grpcio_are_read(receiver):
    """As the Collector (Go) sends them: each message compressed (flag set, ``grpc-encoding:
    gzip``) by the sender. The client is the serve benchmark's, on HTTP/2 (h2)."""
    sys.path.insert(0, str(BENCH))
    try:
        from serve_throughput import send_grpc_gzipped
    finally:
        sys.path.remove(str(BENCH))
    bodies = [gzip.compress(_body(_spans(2))), gzip.compress(_body(_spans(3)))]
    assert send_grpc_gzipped(receiver.ports.grpc, bodies, threads=2) == 0  # none throttled
    wait_until(settled(receiver.ports.metrics, 5), what="both requests played")
    s = scrape(receiver.ports.metrics)
    assert value(s, "agenteval_receiver_requests_total", protocol="grpc", result="ok") == 2
