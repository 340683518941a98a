"""``serve --wal-dir``: a checkpoint never drops a segment holding spans of a run still open, even
when a later segment's runs are all played and scraped; killed after that checkpoint, the next
process still has the open run's spans, and its run is counted whole when its root comes."""

from __future__ import annotations

import json
import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_support import post, scrape, wait_until
from test_serve_input import PB, _body
from test_wal import _counts, _recovered, _start, policy_file  # noqa: F401 - policy_file is a fixture
from wal_support import duplicate_spans

from otel_agenteval.receiver.wal import Log


def open_run() -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """A run with a duplicate claim whose agent span is still open: (its tool spans, its root once ended)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    root = tracer.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                 "gen_ai.agent.name": "support"})
    with trace.use_span(root, end_on_exit=False):
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool create_claim", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                    "gen_ai.tool.call.arguments": json.dumps({"order_id": "open", "reason": "damaged"})}):
                pass
    tools = list(memory.get_finished_spans())
    root.end()
    provider.shutdown()
    return tools, [s for s in memory.get_finished_spans() if s.parent is None]


def _killed(proc) -> None:
    proc.kill()
    proc.wait(10)


def test_a_checkpoint_keeps_an_older_segment_whose_run_is_still_open(tmp_path, policy_file):  # noqa: F811
    wal = tmp_path / "wal"
    args = ["--policy", policy_file, "--wal-dir", str(wal), "--grace", "0.1", "--idle-timeout", "60"]
    tools, root = open_run()
    # 1. the open run's tool spans, acknowledged: the first segment
    proc, info = _start(args)
    try:
        assert post(f"http://127.0.0.1:{info['http_port']}/v1/traces", _body(tools), PB)[0] == 200
    finally:
        _killed(proc)
    # 2. a finished run, played and scraped: the second segment
    proc, info = _start(args)
    try:
        assert post(f"http://127.0.0.1:{info['http_port']}/v1/traces", _body(duplicate_spans(1)), PB)[0] == 200
        wait_until(lambda: _counts(info["metrics_port"]) == (1, 1), what="the finished run played and scraped")
    finally:
        _killed(proc)
    # 3. a scrape checkpoints: the second segment is done with, the first is not
    proc, info = _start(args)
    try:
        assert _recovered(proc)["traces"] == 1
        assert scrape(info["metrics_port"])
    finally:
        _killed(proc)
    # 4. the open run is still there after the kill, and counted whole when its agent span ends
    proc, info = _start(args)
    try:
        summary = _recovered(proc)
        assert (summary["traces"], summary["spans"]) == (1, 2)
        assert post(f"http://127.0.0.1:{info['http_port']}/v1/traces", _body(root), PB)[0] == 200
        wait_until(lambda: _counts(info["metrics_port"]) == (1, 1), what="the open run finished, its duplicate found")
    finally:
        _killed(proc)
    log = Log(wal)  # nothing was lost on the way: the log still reads whole
    assert log.cuts == []
    log.close()


def test_a_request_whose_sync_the_disk_refuses_is_not_acknowledged(tmp_path, monkeypatch):
    """The write went through but the fsync failed (a dying disk, a full thin volume): the request is
    refused (429, the client retries), never acknowledged as if it were safe; once the disk syncs
    again, requests are acknowledged again."""
    from prometheus_client import CollectorRegistry

    from otel_agenteval.receiver import Receiver, ServeConfig

    cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0, grace_s=30, idle_s=60, log_violations=False,
                      wal_dir=str(tmp_path), wal_sync_s=0.01)
    r = Receiver(cfg, registry=CollectorRegistry()).start()
    try:
        url = f"http://127.0.0.1:{r.ports.http}/v1/traces"
        assert post(url, _body(duplicate_spans(1)), PB)[0] == 200

        def refuse(fd: int) -> None:
            raise OSError(5, "Input/output error")

        with monkeypatch.context() as m:
            m.setattr(os, "fsync", refuse)
            assert post(url, _body(duplicate_spans(1, start=1)), PB)[0] == 429
        assert post(url, _body(duplicate_spans(1, start=2)), PB)[0] == 200
    finally:
        r.stop()
