"""Hardening round 4 (#40), hostile bodies through the real ``serve``: a gzip body of many members
(B1) over OTLP/HTTP, gRPC and the write-ahead log at start-up, and OTLP/JSON ids that are not
hex (B7) in ``serve`` and ``replay``."""

from __future__ import annotations

import gzip
import http.client
import json
import subprocess
import sys
import threading
import time
import zlib

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from serve_support import scrape, serve_process, total, value
from test_serve_input import _spans

from otel_agenteval.receiver.wal import HEADER

PB = "application/x-protobuf"
JS = "application/json"
EMPTY_MEMBER = gzip.compress(b"", mtime=0)
MANY_MEMBERS = EMPTY_MEMBER * 200_000  # 4 MB: 25 s to inflate before the fix, on the event loop


@pytest.fixture
def receiver(started_receivers):
    return started_receivers


def _post(port: int, body: bytes, headers: dict[str, str], timeout: float = 60) -> tuple[int, bytes, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(), time.monotonic() - t0
    finally:
        conn.close()


# --- B1: a gzip body of many members --------------------------------------------------------------
def test_a_gzip_body_of_many_members_is_refused_fast_and_a_small_request_meanwhile_is_answered(receiver):
    r = receiver(max_body_bytes=16 << 20)
    hostile: list[tuple[int, bytes, float]] = []
    sender = threading.Thread(target=lambda: hostile.append(
        _post(r.ports.http, MANY_MEMBERS, {"Content-Type": PB, "Content-Encoding": "gzip"})))
    sender.start()
    time.sleep(0.2)  # the hostile body is being read or inflated
    good = encode_spans(_spans()).SerializeToString()
    status, _, took = _post(r.ports.http, gzip.compress(good), {"Content-Type": PB, "Content-Encoding": "gzip"})
    assert status == 200 and took < 1.0, took
    sender.join(60)
    status, answer, took = hostile[0]
    assert status == 400 and b"gzip members" in answer and took < 2.0, (status, answer[:200], took)
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_requests_total", protocol="http", result="bad_request") == 1


def test_a_gzip_body_of_a_few_members_is_still_read_whole(receiver):
    r = receiver()
    good = encode_spans(_spans()).SerializeToString()
    body = gzip.compress(good[:10]) + EMPTY_MEMBER * 500 + gzip.compress(good[10:])
    status, answer, _ = _post(r.ports.http, body, {"Content-Type": PB, "Content-Encoding": "gzip"})
    assert status == 200, answer
    assert total(scrape(r.ports.metrics), "agenteval_receiver_spans_total", result="accepted") == len(_spans())


def test_a_grpc_message_of_many_gzip_members_is_invalid_argument_fast(receiver):
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    r = receiver(max_body_bytes=16 << 20)
    with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}",
                               options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
        call = channel.unary_unary(trace_service_pb2_grpc.TraceServiceStub(channel).Export._method,
                                   request_serializer=lambda b: b, response_deserializer=lambda b: b)
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            call(MANY_MEMBERS, timeout=60)
        took = time.monotonic() - t0
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "gzip members" in err.value.details()
    assert took < 2.0, took


def _segment(records: list[tuple[int, bytes]]) -> bytes:
    return b"".join(HEADER.pack(kind, len(p), zlib.crc32(p)) + p for kind, p in records)


def test_wal_replay_at_start_up_is_bounded_the_same_way(tmp_path):
    wal = tmp_path / "wal"
    wal.mkdir()
    # three logged requests of many gzip members (as an older serve accepted them): HTTP protobuf, gzip
    (wal / "00000001").write_bytes(_segment([(1, bytes((1, 1)) + MANY_MEMBERS)] * 3))
    t0 = time.monotonic()
    with serve_process("--wal-dir", str(wal)) as (proc, info):
        took = time.monotonic() - t0
        assert info["event"] == "listening"
    err = proc.stderr.read() if proc.stderr else ""
    summary = next(json.loads(line) for line in err.splitlines() if '"wal_recovered"' in line)
    assert summary["unreadable_records"] == 3, summary
    assert took < 8.0, took  # interpreter start and imports included; before: 75 s of inflating


# --- B7: OTLP/JSON ids ---------------------------------------------------------------------------
BAD_TRACE_IDS = ["-b8efff798038103d269b633813fc60c", "+b8efff798038103d269b633813fc60c",
                 "0x8efff798038103d269b633813fc60c", "5b8efff7_8038103d269b633813fc60c",
                 " b8efff798038103d269b633813fc60c", "5b8efff798038103d269b633813fc60 "]
BAD_SPAN_IDS = ["-ee19b7ec3c1b174", "+ee19b7ec3c1b174", "0xe19b7ec3c1b174", "eee19b7e_3c1b174", " ee19b7ec3c1b174"]


def _request(trace_id: str, span_id: str) -> bytes:
    span = {"traceId": trace_id, "spanId": span_id, "name": "execute_tool t",
            "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}]}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


GOOD_TID, GOOD_SID = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
BAD_IDS = [(t, GOOD_SID) for t in BAD_TRACE_IDS] + [(GOOD_TID, s) for s in BAD_SPAN_IDS] + [
    (GOOD_TID, GOOD_SID.upper()[:-1] + "g")]


def test_otlp_json_ids_that_are_not_hex_are_rejected_and_counted_by_serve(receiver):
    r = receiver()
    for tid, sid in BAD_IDS:
        status, answer, _ = _post(r.ports.http, _request(tid, sid), {"Content-Type": JS})
        body = json.loads(answer)
        assert status == 200 and body.get("partialSuccess", {}).get("rejectedSpans") == "1", (tid, sid, answer)
        assert "Id" in body["partialSuccess"]["errorMessage"], body
    status, answer, _ = _post(r.ports.http, _request(GOOD_TID.upper(), GOOD_SID), {"Content-Type": JS})
    assert status == 200 and json.loads(answer) == {}, answer  # hex in either case is an id
    s = scrape(r.ports.metrics)
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="rejected") == len(BAD_IDS)
    assert value(s, "agenteval_receiver_spans_total", protocol="http", result="accepted") == 1


def test_otlp_json_ids_that_are_not_hex_are_rejected_by_replay(tmp_path):
    lines = [_request(tid, sid).decode() for tid, sid in BAD_IDS] + [_request(GOOD_TID, GOOD_SID).decode()]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    got = subprocess.run([sys.executable, "-m", "otel_agenteval", "replay", str(trace), "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode in (0, 1), got.stderr
    counted = json.loads(got.stdout)["input"]
    assert (counted["spans"], counted["rejected"]) == (1, len(BAD_IDS)), counted
    assert got.stderr.count("rejected:") == len(BAD_IDS) and "Id '" in got.stderr, got.stderr


def test_sdk_json_ids_are_0x_and_hex_of_the_right_length(tmp_path):
    good = {"name": "s", "context": {"trace_id": "0x" + GOOD_TID, "span_id": "0x" + GOOD_SID},
            "kind": "SpanKind.INTERNAL", "parent_id": None, "start_time": "2026-01-01T00:00:00.000000Z",
            "end_time": "2026-01-01T00:00:01.000000Z", "status": {"status_code": "UNSET"}, "attributes": {},
            "events": [], "resource": {"attributes": {}}}
    bad = [{**good, "context": {"trace_id": "-0x" + GOOD_TID[1:], "span_id": "0x" + GOOD_SID}},
           {**good, "context": {"trace_id": "0x" + GOOD_TID, "span_id": "0x_" + GOOD_SID[1:]}},
           {**good, "context": {"trace_id": "0x" + GOOD_TID, "span_id": "0x" + GOOD_SID[:-1]}}]
    trace = tmp_path / "sdk.json"
    trace.write_text("\n".join(json.dumps(x, indent=4) for x in [*bad, good]) + "\n")
    got = subprocess.run([sys.executable, "-m", "otel_agenteval", "replay", str(trace), "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    counted = json.loads(got.stdout)["input"]
    assert (counted["spans"], counted["rejected"]) == (1, 3), (counted, got.stderr)
