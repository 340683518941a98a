"""Bad input and floods: each gets a clear status and a counter, and the next good request is served."""

from __future__ import annotations

import gzip
import json
import zlib

import grpc
import pytest
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_support import GATE, get, post, rss_bytes, scrape, settled, total, value, wait_until

from otel_agenteval import Policy

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


def _spans(n_runs: int = 1, *, service: str = "shop", attr_len: int = 0, tools: int = 2):
    """Finished SDK spans of ``n_runs`` agent runs (each ``tools`` tool calls)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    big = "x" * attr_len
    for i in range(n_runs):
        agent = "support" + big
        with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                      "gen_ai.agent.name": agent}):
            for j in range(tools):
                with tracer.start_as_current_span("execute_tool", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"lookup{big}",
                        "gen_ai.tool.call.arguments": json.dumps({"q": f"{i}-{j}{big}"})}):
                    pass
    provider.shutdown()
    return memory.get_finished_spans()


def _body(spans) -> bytes:
    return encode_spans(spans).SerializeToString()


@pytest.fixture
def receiver(started_receivers):
    yield started_receivers
    GATE.set()  # a stalled rule lets go before the receivers stop


def _url(r):
    return f"http://127.0.0.1:{r.ports.http}/v1/traces"


def _requests(r, result):
    return value(scrape(r.ports.metrics), "agenteval_receiver_requests_total", protocol="http", result=result)


def _serves_next_good_request(r, expect_traces):
    status, _, body = post(_url(r), _body(_spans()), PB)
    assert status == 200 and body == b""
    wait_until(settled(r.ports.metrics, expect_traces), what="the good request played")


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_bad_bodies_each_get_a_clear_status_and_a_counter(receiver, loop):
    r = receiver(max_body_bytes=64 * 1024, loop=loop)
    good = _body(_spans())
    cases = [
        ("bad_request", 400, PB, b"\xff\xff\xff\xff not protobuf", "not an OTLP ExportTraceServiceRequest"),
        ("bad_request", 400, JS, b'{"resourceSpans": [', "not valid JSON"),
        ("bad_request", 400, JS, b"[1, 2]", "expected an object with resourceSpans"),
        ("unsupported_media_type", 415, {"Content-Type": "text/plain"}, good, "unsupported Content-Type"),
        ("unsupported_media_type", 415, {**PB, "Content-Encoding": "br"}, good, "unsupported Content-Encoding"),
        ("too_large", 413, PB, b"\x0a" * (65 * 1024), "larger than 65536 bytes"),
        ("too_large", 413, {**PB, "Content-Encoding": "gzip"}, gzip.compress(b"\x0a\x00" * 100_000),
         "gunzipped body is larger"),
        ("bad_request", 400, {**PB, "Content-Encoding": "gzip"}, gzip.compress(good)[:-12], "truncated"),
        ("bad_request", 400, {**PB, "Content-Encoding": "gzip"}, b"not gzip at all", "not valid gzip"),
        ("bad_request", 400, {**PB, "Content-Encoding": "deflate"}, zlib.compress(good)[:-6], "truncated"),
        ("too_large", 413, {**PB, "Content-Encoding": "deflate"}, zlib.compress(b"\x0a\x00" * 100_000),
         "inflated body is larger"),
    ]
    for result, code, headers, body, says in cases:
        before = _requests(r, result)
        status, got_headers, answer = post(_url(r), body, headers)
        assert status == code, (says, answer)
        if headers["Content-Type"] in ("application/json",):
            assert says in json.loads(answer)["message"]
        else:
            st = Status()
            st.ParseFromString(answer)
            assert says in st.message, (says, st.message)
        assert _requests(r, result) == before + 1, result
    status, _ = get(_url(r))
    assert status == 405
    _serves_next_good_request(r, 1)


def test_unreadable_spans_are_rejected_by_partial_success(receiver):
    r = receiver()
    req = encode_spans(_spans())
    extra = req.resource_spans[0].scope_spans[0].spans.add()
    extra.name = "no ids"  # missing trace_id and span_id
    bad_id = req.resource_spans[0].scope_spans[0].spans.add()
    bad_id.name = "short id"
    bad_id.trace_id = b"\x01" * 16
    bad_id.span_id = b"\x02" * 3
    status, _, body = post(_url(r), req.SerializeToString(), PB)
    assert status == 200
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(body)
    assert resp.partial_success.rejected_spans == 2
    assert "trace_id has 0 bytes" in resp.partial_success.error_message
    assert "span_id has 3 bytes, expected 8" in resp.partial_success.error_message
    # the same in OTLP/JSON: an id that is not hex
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "zz" * 16, "spanId": "01" * 8, "name": "bad"},
        {"traceId": "01" * 16, "spanId": "02" * 8, "name": "GET /ok"}]}]}]}
    status, _, body = post(_url(r), json.dumps(doc).encode(), JS)
    assert status == 200
    partial = json.loads(body)["partialSuccess"]
    assert partial["rejectedSpans"] in (1, "1") and "spans[0]" in partial["errorMessage"] and "zzzz" in partial["errorMessage"]
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="rejected") == 3
    assert value(s, "agenteval_receiver_requests_total", protocol="http", result="partial") == 2
    wait_until(settled(r.ports.metrics, 2), what="the readable spans played")


def _huge(receiver):
    r = receiver()
    exporter = HttpExporter(endpoint=_url(r))
    assert exporter.export(_spans(2, service="svc" + "s" * 100_000, attr_len=100_000)).name == "SUCCESS"
    wait_until(settled(r.ports.metrics, 2), what="the big spans played")
    return r, scrape(r.ports.metrics)


def test_huge_attribute_values_are_carried(receiver):
    r, s = _huge(receiver)
    assert total(s, "agenteval_trajectories_total") == 2
    assert total(s, "agenteval_tool_calls_total") == 4
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="accepted") == 6
    _serves_next_good_request(r, 3)


def test_huge_attribute_values_make_bounded_labels(receiver):
    _, s = _huge(receiver)
    assert max(len(v) for _, labels in s for _, v in labels) <= 64  # no 100k-character label value


def test_a_flood_beyond_the_queue_is_refused_with_retry_after_and_memory_stays_flat(receiver):
    policy = Policy.from_dict({"custom_rules": ["serve_support:gate_rule"]})
    r = receiver(policy, queue_spans=200, max_spans_per_request=100, retry_after_s=2)
    GATE.clear()  # the engine stalls in a rule: nothing leaves the queue
    assert post(_url(r), _body(_spans(1, tools=1)), PB)[0] == 200
    wait_until(lambda: r.pipeline.queue.spans == 0 and r.pipeline.feeder.held_traces == 0,
               what="the engine stalled in the rule")
    hundred = _body(_spans(25, tools=3))  # 100 spans a request
    assert [post(_url(r), _body(_spans(25, tools=3)), PB)[0] for _ in range(2)] == [200, 200]  # full now
    status, headers, body = post(_url(r), hundred, PB)
    assert status == 429 and headers["retry-after"] == "2"
    for _ in range(30):
        post(_url(r), hundred, PB)  # warm up
    rss = rss_bytes()
    codes = {post(_url(r), hundred, PB)[0] for _ in range(300)}
    assert codes == {429}
    assert rss_bytes() - rss < 16 << 20  # refused requests leave nothing behind
    # gRPC says the same: RESOURCE_EXHAUSTED with a RetryInfo, where the Collector and the SDK look
    with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                     request_serializer=ExportTraceServiceRequest.SerializeToString,
                                     response_deserializer=ExportTraceServiceResponse.FromString)
        req = ExportTraceServiceRequest()
        req.ParseFromString(hundred)
        with pytest.raises(grpc.RpcError) as err:
            export(req, timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    trailers = dict(err.value.trailing_metadata())
    status_detail = Status.FromString(trailers["grpc-status-details-bin"])
    info = RetryInfo()
    assert status_detail.details[0].Unpack(info) and info.retry_delay.seconds == 2
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_queue_spans") == 200  # never past its bound
    assert value(s, "agenteval_receiver_requests_total", protocol="http", result="throttled") == 331
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="refused") == 33_100
    assert value(s, "agenteval_receiver_requests_total", protocol="grpc", result="throttled") == 1
    assert get(f"http://127.0.0.1:{r.ports.metrics}/readyz")[0] == 503  # above its high-water mark
    GATE.set()
    wait_until(settled(r.ports.metrics, 51), what="the queue drained")
    assert get(f"http://127.0.0.1:{r.ports.metrics}/readyz")[0] == 200
    _serves_next_good_request(r, 52)


def test_a_batch_sent_twice_is_played_once(receiver):
    r = receiver(grace_s=0.5)
    body = _body(_spans(3))
    assert [post(_url(r), body, PB)[0] for _ in range(2)] == [200, 200]  # a retry after a lost answer
    wait_until(settled(r.ports.metrics, 3), what="played")
    s = scrape(r.ports.metrics)
    assert total(s, "agenteval_trajectories_total") == 3 and total(s, "agenteval_tool_calls_total") == 6
    assert value(s, "agenteval_receiver_duplicate_spans_total") == 9
    assert post(_url(r), body, PB)[0] == 200  # once more, after the play (a retry after a crash): duplicates
    wait_until(lambda: value(scrape(r.ports.metrics), "agenteval_receiver_duplicate_spans_total") == 18,
               what="the retry counted as duplicates")
    assert value(scrape(r.ports.metrics), "agenteval_late_spans_total") == 0  # nothing was late


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_body_that_does_not_arrive_in_time_gets_408(receiver, loop):
    import socket

    r = receiver(body_timeout_s=0.5, loop=loop)
    with socket.create_connection(("127.0.0.1", r.ports.http), timeout=10) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                  b"Content-Length: 1000\r\n\r\n" + b"\x0a" * 10)  # then nothing
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert _requests(r, "timeout") == 1
    _serves_next_good_request(r, 1)
