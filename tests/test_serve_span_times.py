"""Span times that cannot be right, the same over OTLP/JSON, OTLP/HTTP protobuf and OTLP/gRPC:
a time out of OTLP's range is a 400 naming the field; a span ending before it starts, ending more
than a day in the future or lasting more than a day is rejected on its own (partial success,
counted), never played, so no trajectory histogram gets a wrong value."""

from __future__ import annotations

import json
import time

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_support import post, scrape, settled, total, value, wait_until

DAY = 86_400 * 10**9
JS = {"Content-Type": "application/json"}


def _bad_roots(now: int) -> dict[str, tuple[int, int]]:
    """Agent runs' root spans whose (start, end) cannot be right, by what is wrong."""
    return {"ends before it starts": (now - 10**9, now - 2 * 10**9),
            "ends in ten days": (now, now + 10 * DAY),
            "lasts two days": (now - 3 * DAY, now - DAY)}


def _sdk_spans(now: int):
    """A good agent run (root and a tool call) and the bad roots, as the SDK ends them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
    with tracer.start_as_current_span("invoke_agent", attributes=agent), \
            tracer.start_as_current_span("execute_tool", attributes=tool):
        pass
    for start, end in _bad_roots(now).values():
        tracer.start_span("invoke_agent", attributes=agent, start_time=start).end(end_time=end)
    provider.shutdown()
    return memory.get_finished_spans()


def _json_request(spans: list[tuple[int | str, int | str]], event_time: int | None = None) -> bytes:
    out = []
    for i, (start, end) in enumerate(spans):
        span = {"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": "invoke_agent",
                "startTimeUnixNano": start, "endTimeUnixNano": end,
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                               {"key": "gen_ai.agent.name", "value": {"stringValue": "support"}}]}
        if event_time is not None:
            span["events"] = [{"name": "e", "timeUnixNano": event_time}]
        out.append(span)
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": out}]}]}).encode()


def _trajectories(r) -> tuple[float, float]:
    s = scrape(r.ports.metrics)
    return (total(s, "agenteval_trajectory_duration_seconds_count"),
            total(s, "agenteval_trajectory_duration_seconds_sum"))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_protobuf_spans_with_impossible_times_are_rejected_and_counted(started_receivers, protocol):
    r = started_receivers()
    exporter = (HttpExporter(endpoint=f"http://127.0.0.1:{r.ports.http}/v1/traces", timeout=5) if protocol == "http"
                else GrpcExporter(endpoint=f"127.0.0.1:{r.ports.grpc}", insecure=True, timeout=5))
    assert exporter.export(_sdk_spans(time.time_ns())).name == "SUCCESS"  # partial success is a success
    exporter.shutdown()
    wait_until(settled(r.ports.metrics, 1), what="the good run played")
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_spans_total", protocol=protocol, result="rejected") == 3
    assert value(s, "agenteval_receiver_spans_total", protocol=protocol, result="accepted") == 2
    assert value(s, "agenteval_receiver_requests_total", protocol=protocol, result="partial") == 1
    count, seconds = _trajectories(r)
    assert count == 1 and seconds < 5  # the good run only: no 0 s, no two days


def test_json_spans_with_impossible_times_are_rejected_by_name_like_protobuf(started_receivers):
    r = started_receivers()
    now = time.time_ns()
    bad = _bad_roots(now)
    status, _, body = post(f"http://127.0.0.1:{r.ports.http}/v1/traces",
                           _json_request([(now - 10**9, now), *bad.values()]), JS)
    assert status == 200
    partial = json.loads(body)["partialSuccess"]
    assert partial["rejectedSpans"] == "3"
    message = partial["errorMessage"]
    assert "endTimeUnixNano" in message and "before startTimeUnixNano" in message
    assert "more than a day past" in message and "more than a day: its times cannot be right" in message
    wait_until(settled(r.ports.metrics, 1), what="the good run played")
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="rejected") == 3
    count, seconds = _trajectories(r)
    assert count == 1 and seconds < 5


@pytest.mark.parametrize(("times", "event_time", "field"), [
    ((-5, 10**18), None, "startTimeUnixNano -5 is out of range"),
    ((10**18, 1 << 64), None, f"endTimeUnixNano {1 << 64} is out of range"),
    (("-1000", "1000"), None, "startTimeUnixNano -1000 is out of range"),  # the string form, as int64s are sent
    ((10**18, 10**18 + 1), -1, "events.timeUnixNano -1 is out of range"),
])
def test_json_times_no_otlp_field_can_hold_are_a_400_naming_the_field(started_receivers, times, event_time, field):
    r = started_receivers()
    status, _, body = post(f"http://127.0.0.1:{r.ports.http}/v1/traces", _json_request([times], event_time), JS)
    assert status == 400
    assert field in json.loads(body)["message"]
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_requests_total", protocol="http", result="bad_request") == 1
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="accepted") == 0


@pytest.mark.parametrize("kind", ["ends before it starts", "ends in ten days", "lasts two days"])
@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_a_request_whose_only_bad_span_has_one_wrong_time_rejects_that_span(started_receivers, kind, encoding):
    """The one bad span of a request of good ones, for each way a time can be wrong alone (a request
    with nothing else wrong is looked at in one pass: that pass must see each of them)."""
    r = started_receivers()
    now = time.time_ns()
    url = f"http://127.0.0.1:{r.ports.http}/v1/traces"
    if encoding == "json":
        status, _, body = post(url, _json_request([(now - 10**9, now), _bad_roots(now)[kind]]), JS)
        assert status == 200
        assert json.loads(body)["partialSuccess"]["rejectedSpans"] == "1"
    else:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        good_and_all_bad = _sdk_spans(now)
        bad_start, bad_end = _bad_roots(now)[kind]
        spans = [s for s in good_and_all_bad if s.start_time < s.end_time <= now + DAY and s.end_time - s.start_time < DAY
                 or (s.start_time, s.end_time) == (bad_start, bad_end)]
        assert len(spans) == 3
        status, _, _ = post(url, encode_spans(spans).SerializeToString(), {"Content-Type": "application/x-protobuf"})
        assert status == 200
    wait_until(settled(r.ports.metrics, 1), what="the good run played")
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="rejected") == 1
    count, seconds = _trajectories(r)
    assert count == 1 and 0 < seconds < 5  # the good run only
