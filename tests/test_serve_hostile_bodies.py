"""Every malformed body of the hostile-input audit, and a fuzzed corpus, through the real server:
each is a 4xx (never a 500), counted, answered fast, and /healthz keeps answering meanwhile."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from serve_support import get, scrape, settled, total, wait_until
from test_serve_input import _spans

PB = "application/x-protobuf"
JS = "application/json"


@pytest.fixture
def receiver(started_receivers):
    return started_receivers


def _post(port: int, body: bytes, ctype: str, timeout: float = 30) -> tuple[int, bytes, float]:
    """One POST on a fresh connection: (status, body, seconds taken)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    try:
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        return resp.status, resp.read(), time.monotonic() - t0
    finally:
        conn.close()


def _message(status: int, answer: bytes, ctype: str) -> str:
    if status == 200:
        return ""
    if ctype == JS:
        return str(json.loads(answer).get("message", ""))
    from google.rpc.status_pb2 import Status

    st = Status()
    st.ParseFromString(answer)
    return str(st.message)


def _span_json(**over: object) -> dict:
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "s",
            "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}]}
    span.update(over)
    return span


def _request_json(span: dict | str) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def _kvlist(depth: int) -> str:
    value = '{"stringValue": "leaf"}'
    for _ in range(depth):
        value = '{"kvlistValue": {"values": [{"key": "k", "value": ' + value + '}]}}'
    return value


def _pb_len(field: int, payload: bytes) -> bytes:
    n, out = len(payload), bytearray([field << 3 | 2])
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out) + payload


def _pb_deep_kvlist(depth: int) -> bytes:
    """ExportTraceServiceRequest whose one span's attribute is an AnyValue kvlist nested ``depth`` deep."""
    value = _pb_len(1, b"leaf")  # AnyValue.string_value
    for _ in range(depth):
        kv = _pb_len(1, b"k") + _pb_len(2, value)  # KeyValue{key, value}
        value = _pb_len(6, _pb_len(1, kv))  # AnyValue.kvlist_value{values}
    attribute = _pb_len(1, b"a") + _pb_len(2, value)
    span = (_pb_len(1, bytes(range(1, 17))) + _pb_len(2, bytes(range(1, 9))) + _pb_len(5, b"s")
            + _pb_len(9, attribute))
    return _pb_len(1, _pb_len(2, _pb_len(2, span)))  # resource_spans{scope_spans{spans}}


MIB = 1 << 20

# (name, content type, body, a word the 4xx answer must contain); a bad span in a readable request
# is rejected on its own (200 with partial_success naming it), the rest are 400
PARTIAL = {"attributes a string", "attributes an object", "kvlist 70 deep"}
AUDIT = [
    ("start time 1e400", JS, b'{"resourceSpans": [{"scopeSpans": [{"spans": [%s]}]}]}' % json.dumps(
        _span_json()).replace('"1000"', "1e400").encode(), "startTimeUnixNano"),
    ("end time -1e400", JS, _request_json(_span_json()).replace(b'"2000"', b"-1e400"), "endTimeUnixNano"),
    ("start time NaN", JS, _request_json(_span_json()).replace(b'"1000"', b"NaN"), "startTimeUnixNano"),
    ("event time 1e400", JS, _request_json(_span_json(events=[{"name": "e", "timeUnixNano": "T"}])).replace(
        b'"T"', b"1e400"), "timeUnixNano"),
    ("intValue 1e400", JS, _request_json(_span_json(attributes=[{"key": "n", "value": {"intValue": "X"}}])).replace(
        b'"X"', b"1e400"), "intValue"),
    ("100k-deep array", JS, b"[" * 100_000 + b"]" * 100_000, "deep"),
    ("100k-deep array in a span", JS, b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + b"[" * 100_000
     + b"]" * 100_000 + b"]}]}]}", "deep"),
    ("kvlist 600 deep", JS, _request_json(_span_json(attributes="A")).replace(
        b'"A"', b'[{"key": "k", "value": ' + _kvlist(600).encode() + b"}]"), "deep"),
    ("kvlist 5000 deep", JS, _request_json(_span_json(attributes="A")).replace(
        b'"A"', b'[{"key": "k", "value": ' + _kvlist(5000).encode() + b"}]"), "deep"),
    ("resourceSpans a 15 MiB string", JS, json.dumps({"resourceSpans": "x" * (15 * MIB)}).encode(), "resourceSpans"),
    ("resourceSpans an object", JS, b'{"resourceSpans": {"a": 1}}', "resourceSpans"),
    ("scopeSpans a string", JS, json.dumps({"resourceSpans": [{"scopeSpans": "y" * MIB}]}).encode(), "scopeSpans"),
    ("spans a string", JS, json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": "z" * MIB}]}]}).encode(), "spans"),
    ("attributes a string", JS, _request_json(_span_json(attributes="w" * MIB)), "attributes"),
    ("attributes an object", JS, _request_json(_span_json(attributes={"k": "v"})), "attributes"),
    ("kvlist 70 deep", JS, _request_json(_span_json(attributes="A")).replace(
        b'"A"', b'[{"key": "k", "value": ' + _kvlist(70).encode() + b"}]"), "nested too deep"),
    ("top-level 1e400", JS, b"1e400", "not a finite number"),
    ("top-level string", JS, json.dumps("s" * MIB).encode(), "resourceSpans"),
    ("protobuf kvlist 600 deep", PB, _pb_deep_kvlist(600), "deep"),
    ("protobuf kvlist 5000 deep", PB, _pb_deep_kvlist(5000), "deep"),
]


def _healthz_watch(port: int, stop: threading.Event, worst: list[float]) -> None:
    while not stop.is_set():
        t0 = time.monotonic()
        status, _ = get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        worst.append(time.monotonic() - t0 if status == 200 else 99.0)
        time.sleep(0.02)


def test_every_malformed_shape_of_the_audit_is_a_counted_4xx_naming_the_field(receiver):
    r = receiver(max_body_bytes=16 * MIB)
    stop, worst = threading.Event(), [0.0]
    watcher = threading.Thread(target=_healthz_watch, args=(r.ports.metrics, stop, worst), daemon=True)
    watcher.start()
    try:
        for name, ctype, body, says in AUDIT:
            result = "partial" if name in PARTIAL else "bad_request"
            before = total(scrape(r.ports.metrics), "agenteval_receiver_requests_total", result=result)
            status, answer, took = _post(r.ports.http, body, ctype)
            assert status == (200 if name in PARTIAL else 400), (name, status, answer[:300])
            message = json.loads(answer)["partialSuccess"]["errorMessage"] if name in PARTIAL else _message(
                status, answer, ctype)
            assert says.lower() in message.lower(), (name, message)
            assert took < 5, (name, took)
            after = total(scrape(r.ports.metrics), "agenteval_receiver_requests_total", result=result)
            assert after == before + 1, name
    finally:
        stop.set()
        watcher.join(15)
    assert max(worst) < 1.0, f"/healthz took {max(worst):.2f}s during the hostile bodies"
    status, _, _ = _post(r.ports.http, encode_spans(_spans()).SerializeToString(), PB)
    assert status == 200
    wait_until(settled(r.ports.metrics, 1), what="the good request played")


def _mutations(rng: random.Random, good: bytes, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        b = bytearray(good)
        how = rng.randrange(5)
        if how == 0:  # bytes flipped
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif how == 1:  # truncated
            b = b[:rng.randrange(len(b))]
        elif how == 2:  # a slice repeated
            i = rng.randrange(len(b))
            b[i:i] = b[i:i + rng.randint(1, 64)] * rng.randint(2, 200)
        elif how == 3:  # bytes inserted
            i = rng.randrange(len(b))
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:  # a slice removed
            i = rng.randrange(len(b))
            del b[i:i + rng.randint(1, 32)]
        out.append(bytes(b))
    return out


_JSON_VALUES = ['1e400', '-1e400', 'NaN', 'Infinity', 'null', 'true', '"x"', '[]', '{}', '[[[[[[[[1]]]]]]]]',
                str(1 << 80), '-1', '1.5', '"%s"' % ("9" * 5000), '{"intValue": 1e400}', '{"kvlistValue": 7}',
                '{"arrayValue": {"values": 3}}', '{"bytesValue": "!!"}', '{"doubleValue": "x"}']


def _json_mutations(rng: random.Random, good: str, n: int) -> list[bytes]:
    """Each JSON value of a good request replaced by an odd one, at random."""
    import re

    spots = [m.span() for m in re.finditer(r'("[^"]*"|\d+|\[\]|\{\})(?=\s*[,}\]])', good)]
    out = []
    for _ in range(n):
        a, b = spots[rng.randrange(len(spots))]
        out.append((good[:a] + rng.choice(_JSON_VALUES) + good[b:]).encode())
    return out


def test_a_fuzzed_corpus_gets_no_500(receiver):
    from google.protobuf.json_format import MessageToJson

    r = receiver()
    rng = random.Random(28)
    message = encode_spans(_spans(2))
    good_pb = message.SerializeToString()
    good_js = MessageToJson(message, indent=None)
    corpus = ([(PB, b) for b in _mutations(rng, good_pb, 250)] + [(JS, b) for b in _mutations(rng, good_js.encode(), 150)]
              + [(JS, b) for b in _json_mutations(rng, good_js, 250)])
    seen: dict[int, int] = {}
    for ctype, body in corpus:
        status, answer, took = _post(r.ports.http, body, ctype)
        seen[status] = seen.get(status, 0) + 1
        assert status in (200, 400, 413), (status, body[:200], answer[:300])
        assert took < 5
    s = scrape(r.ports.metrics)
    assert total(s, "agenteval_receiver_requests_total", protocol="http") >= len(corpus)
    assert total(s, "agenteval_receiver_requests_total", result="bad_request") == seen.get(400, 0)
    assert seen.get(400, 0) > 50
    assert total(s, "agenteval_receiver_errors_total") == 0  # every one foreseen by a reader, none by the net


def test_malformed_and_fuzzed_grpc_messages_are_invalid_argument_and_counted(receiver):
    import grpc

    r = receiver()
    rng = random.Random(2028)
    bodies = [b for _, ctype, b, _ in AUDIT if ctype == PB] + _mutations(rng, encode_spans(_spans(2)).SerializeToString(),
                                                                          200)
    with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                     request_serializer=None, response_deserializer=None)
        bad = 0
        for body in bodies:
            try:
                export(body, timeout=10)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (exc.code(), exc.details())
                bad += 1
    s = scrape(r.ports.metrics)
    assert total(s, "agenteval_receiver_requests_total", protocol="grpc", result="bad_request") == bad
    assert total(s, "agenteval_receiver_errors_total") == 0
    assert bad >= 2


def test_a_grpc_message_past_grpcios_limit_is_counted(receiver):
    import grpc

    r = receiver(max_body_bytes=64 * 1024)
    with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                     request_serializer=None, response_deserializer=None)
        for size in (100 * 1024, 200 * 1024):  # past --max-body-bytes; past grpcio's own limit (2x)
            with pytest.raises(grpc.RpcError) as err:
                export(b"\x0a" * size, timeout=10)
            assert err.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert export(encode_spans(_spans()).SerializeToString(), timeout=10) == b""
    s = scrape(r.ports.metrics)
    assert total(s, "agenteval_receiver_requests_total", protocol="grpc", result="too_large") == 1
    assert total(s, "agenteval_receiver_requests_total", protocol="grpc", result="not_received") == 1
    assert total(s, "agenteval_receiver_requests_total", protocol="grpc", result="ok") == 1
