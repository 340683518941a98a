"""``serve --wal-dir`` with the memory budget (``--memory-limit-mib``): recovered spans are charged,
traces played early for memory are marked played in the log, a request refused for memory is never
logged, and a big body decoded off the event loop is logged before it is acknowledged."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry
from serve_support import post, scrape, total, value, wait_until
from test_serve_input import PB, _body
from wal_support import duplicate_spans

from otel_agenteval.receiver import Receiver, ServeConfig
from otel_agenteval.receiver.durability import HTTP_PROTOBUF, PLAYED, SPANS, _tids
from otel_agenteval.receiver.listeners import otlp_http
from otel_agenteval.receiver.memory import span_bytes
from otel_agenteval.receiver.wal import OK, Log

RUNS_PER_REQUEST = 10


def _config(wal: Path, **kw) -> ServeConfig:
    return ServeConfig(grpc_port=0, http_port=0, metrics_port=0, log_violations=False, wal_dir=str(wal),
                       **{"grace_s": 30, "idle_s": 60, "max_body_bytes": 65536, **kw})


def _logged(wal: Path, requests: int) -> list[bytes]:
    """A log as a killed serve leaves it: ``requests`` OTLP/HTTP protobuf requests, nothing played."""
    log = Log(wal).start()
    bodies = [_body(duplicate_spans(RUNS_PER_REQUEST, start=RUNS_PER_REQUEST * i)) for i in range(requests)]
    for body in bodies:
        assert log.append(SPANS, bytes((HTTP_PROTOBUF, 0)) + body).result(5) == OK
    log.close()
    return bodies


def _charged(body: bytes, spans: int) -> int:
    return span_bytes(len(body), spans) // spans * spans  # shared evenly by the spans held


def _played_marks(wal: Path) -> set[int]:
    """Trace ids marked played in a copy of the log (the live one is locked by its serve)."""
    copy = wal.parent / f"{wal.name}-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(wal, copy, ignore=shutil.ignore_patterns("LOCK"))
    log = Log(copy)
    marks = {tid for r in log.read() if r.type == PLAYED for tid in _tids(r.payload)}
    log.close()
    return marks


def test_recovered_spans_are_charged_to_the_memory_budget(tmp_path):
    wal = tmp_path / "wal"
    bodies = _logged(wal, 3)
    r = Receiver(_config(wal), registry=CollectorRegistry()).start()
    try:
        assert r.durability is not None
        summary = r.durability.summary
        spans = 4 * RUNS_PER_REQUEST
        assert summary["spans"] == 3 * spans and summary["traces"] == 3 * RUNS_PER_REQUEST
        charged = sum(_charged(b, spans) for b in bodies)
        assert summary["held_bytes"] == charged == r.pipeline.feeder.held_bytes
        assert value(scrape(r.ports.metrics), "agenteval_receiver_memory_bytes", kind="spans") == charged
    finally:
        r.stop(5)


def test_traces_played_early_for_memory_at_recovery_are_marked_and_not_played_again(tmp_path):
    wal = tmp_path / "wal"
    _logged(wal, 30)  # 300 runs, ~1.3 MB as held spans: past half of a 1 MiB budget
    r = Receiver(_config(wal, memory_limit_mib=1), registry=CollectorRegistry()).start()
    try:
        summary = r.durability.summary
        early = summary["played_early"]
        assert early > 0 and summary["traces"] == 300 - early
        assert r.pipeline.feeder.held_bytes <= r.pipeline.memory.held_limit
        wait_until(lambda: value(scrape(r.ports.metrics), "agenteval_receiver_traces_total", reason="memory") == early,
                   what="the early plays counted")
        s = scrape(r.ports.metrics)  # a scrape marks what was played since the last checkpoint
        assert total(s, "agenteval_trajectories_total") == early
        marks = _played_marks(wal)
        assert len(marks) == early
        assert not any(r.pipeline.feeder.holds(tid) for tid in marks)
    finally:
        r.stop(5)  # the copy taken above is the log as a crash would have left it
    again = Receiver(_config(tmp_path / "wal-copy"), registry=CollectorRegistry()).start()
    try:
        summary = again.durability.summary
        assert summary["played_traces_skipped"] == early
        assert summary["traces"] == 300 - early and summary["played_early"] == 0  # each run played once
    finally:
        again.stop(5)


def test_a_request_refused_for_memory_is_not_logged(tmp_path):
    r = Receiver(_config(tmp_path / "wal", memory_limit_mib=1), registry=CollectorRegistry()).start()
    try:
        log = r.durability.log
        body = _body(duplicate_spans(2))
        budget = r.pipeline.memory
        taken = budget.limit // 2 - len(body) // 2  # reserved at twice that: the budget all but taken
        assert budget.reserve_body(taken)
        url = f"http://127.0.0.1:{r.ports.http}/v1/traces"
        assert post(url, body, PB)[0] == 429
        with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}") as ch:
            export = ch.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as err:
                export(body, timeout=10)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert log.bytes == 0  # nothing logged: the client retries, and is logged then
        s = scrape(r.ports.metrics)
        assert total(s, "agenteval_receiver_requests_total", result="memory_limited") == 2
        assert total(s, "agenteval_wal_refused_spans_total") == 0
        budget.release_body(taken)
        assert post(url, body, PB)[0] == 200
        assert log.bytes > len(body)
    finally:
        r.stop(5)


def test_a_body_decoded_off_the_event_loop_is_logged_before_it_is_acknowledged(tmp_path, monkeypatch):
    monkeypatch.setattr(otlp_http, "OFFLOAD_BYTES", 0)  # every body on a decoder thread
    wal = tmp_path / "wal"
    r = Receiver(_config(wal), registry=CollectorRegistry()).start()
    try:
        body = _body(duplicate_spans(5))
        assert post(f"http://127.0.0.1:{r.ports.http}/v1/traces", body, PB)[0] == 200
        assert r.durability.log.stats["syncs"] >= 1
        wait_until(lambda: r.pipeline.feeder.held_traces == 5, what="5 traces held")
        assert r.pipeline.feeder.held_bytes == _charged(body, 20)
        assert _played_marks(wal) == set()
    finally:
        r.stop(5)
    again = Receiver(_config(tmp_path / "wal-copy"), registry=CollectorRegistry()).start()
    try:
        assert again.durability.summary["spans"] == 20
    finally:
        again.stop(5)
