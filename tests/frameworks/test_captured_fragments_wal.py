"""Pieces of runs held in ``serve`` (engine/fragments/, after ``--fragment-linger``) are as durable
as held traces: with ``--wal-dir`` a kill -9 while they are held loses none of them (their traces
are marked played only once the pieces are), the next process puts the run back together and
counts it once; a graceful stop plays them; and they count in the memory budget, shed as they
came past it, counted. The OpenLLMetry-JS capture: 35 spans, each a trace of its own."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from prometheus_client import CollectorRegistry
from scenario import POLICY
from serve_support import post, scrape, total, value, wait_until
from test_captured_fragments import SCOPE, SPAN_COUNT, WANT, capture, copy_of
from test_captured_serve import POLICY as POLICY_YAML
from test_captured_serve import served_figures
from test_wal import _recovered, _start

from otel_agenteval.receiver.decoding import from_protobuf
from otel_agenteval.receiver.memory import span_bytes
from otel_agenteval.receiver.pipeline import OK, Pipeline

PB = {"Content-Type": "application/x-protobuf"}
RUN = {"trajectories": WANT["trajectories"], "tool_calls": WANT["tool_calls"], "tokens": WANT["tokens"][0],
       "duplicate_write": 1.0}  # the capture read as one run


def _segments(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.isdigit())


def _figures(port: int) -> dict:
    s = scrape(port)  # with --wal-dir a scrape is a checkpoint: what it shows is marked played first
    return {"run": served_figures(s, "support-svc"), "spans": total(s, "agenteval_spans_total"),
            "stitched": value(s, "agenteval_fragments_stitched_total", scope=SCOPE),
            "fragmented": total(s, "agenteval_fragmented_spans_total"),
            "held": value(s, "agenteval_receiver_held_spans"), "played": total(s, "agenteval_receiver_traces_total")}


def _held(port: int) -> bool:
    got = _figures(port)
    return got["played"] == got["held"] == SPAN_COUNT  # the traces played, each piece held in the engine


NOTHING = {"run": {"trajectories": [], "tool_calls": {}, "tokens": (0, 0), "duplicate_write": 0.0}, "spans": 0.0,
           "stitched": 0.0, "fragmented": 0.0}


def _killed(proc) -> None:
    proc.kill()
    proc.wait(10)


def _args(tmp_path: Path, linger: str) -> list[str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_YAML)
    return ["--policy", str(policy), "--wal-dir", str(tmp_path / "wal"), "--grace", "0.1", "--idle-timeout", "60",
            "--fragment-linger", linger]


def test_kill_9_while_pieces_are_held_loses_none_and_counts_the_run_once(tmp_path: Path) -> None:
    wal = tmp_path / "wal"
    # 1. every trace played, its piece held for the linger; scraped (a checkpoint), then killed
    proc, info = _start(_args(tmp_path, "60"))
    try:
        body = encode_spans(capture()).SerializeToString()
        assert post(f"http://127.0.0.1:{info['http_port']}/v1/traces", body, PB)[0] == 200
        wait_until(lambda: _held(info["metrics_port"]), what="every trace played, its piece held")
        got = _figures(info["metrics_port"])
        assert {k: got[k] for k in NOTHING} == NOTHING  # held: counted nowhere yet
    finally:
        _killed(proc)
    # 2. the log gives every piece back: held again, put back together, counted once
    proc, info = _start(_args(tmp_path, "0.3"))
    try:
        summary = _recovered(proc)
        assert (summary["spans"], summary["traces"], summary["played_traces_skipped"]) == (SPAN_COUNT, SPAN_COUNT, 0)
        wait_until(lambda: _figures(info["metrics_port"])["stitched"] == SPAN_COUNT, what="the run put back together")
        got = _figures(info["metrics_port"])
        assert (got["run"], got["spans"], got["fragmented"], got["held"]) == (RUN, SPAN_COUNT, 0, 0)
        # played and scraped: the first process's segment is done with
        wait_until(lambda: _segments(wal) == ["00000002"] and bool(scrape(info["metrics_port"])),
                   what="the first segment dropped")
    finally:
        _killed(proc)
    # 3. killed after that scrape: nothing is played (or counted) again
    proc, info = _start(_args(tmp_path, "0.3"))
    try:
        summary = _recovered(proc)
        assert summary["spans"] == 0
        time.sleep(0.6)  # past the linger: anything held again would be played by now
        got = _figures(info["metrics_port"])
        assert {k: got[k] for k in NOTHING} == NOTHING
    finally:
        _killed(proc)


def test_a_graceful_stop_plays_the_held_pieces_before_the_log_goes(tmp_path: Path) -> None:
    proc, info = _start(_args(tmp_path, "60"))
    try:
        body = encode_spans(capture()).SerializeToString()
        assert post(f"http://127.0.0.1:{info['http_port']}/v1/traces", body, PB)[0] == 200
        wait_until(lambda: _held(info["metrics_port"]), what="every trace played, its piece held")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            _killed(proc)
    lines = [json.loads(line) for line in proc.stderr if line.startswith("{")]
    draining = next(x for x in lines if x.get("event") == "draining")
    stopped = next(x for x in lines if x.get("event") == "stopped")
    assert draining["held_spans"] == SPAN_COUNT  # said as held, not lost
    assert (stopped["drained"], sum(stopped["trajectories"].values()), stopped["lost"]) == (True, 1, {})
    assert _segments(tmp_path / "wal") == []  # every piece played: nothing left to recover


def test_held_pieces_count_in_the_memory_budget_and_past_it_are_played_as_they_came() -> None:
    first = encode_spans(capture()).SerializeToString()
    second = encode_spans(copy_of(capture(), 10**9, 0x5A5A)).SerializeToString()  # the app's next run, 1 s later
    nbytes = span_bytes(len(first), SPAN_COUNT)
    registry = CollectorRegistry()
    # the held share (half the limit) takes one run's spans, not two
    p = Pipeline(POLICY, registry, queue_spans=1000, grace_s=0, idle_s=60, max_held_spans=10_000,
                 memory_limit=3 * nbytes, fragment_linger_s=60, log_violations=False)
    pieces = p.engine.fragments
    p.start()
    try:
        assert p.submit(from_protobuf(first).spans, nbytes) == OK
        wait_until(lambda: pieces.size == SPAN_COUNT, what="the first run's pieces held")
        assert p.memory.spans() == pieces.bytes > nbytes - SPAN_COUNT  # counted at what their traces were
        assert registry.get_sample_value("agenteval_receiver_held_spans") == SPAN_COUNT
        assert p.submit(from_protobuf(second).spans, nbytes) == OK
        wait_until(lambda: pieces.size == SPAN_COUNT and p.feeder.held_spans == 0, what="the second run's pieces held")
        assert p.memory.spans() <= p.memory.held_limit
    finally:
        assert p.stop(30)  # the drain plays what is held
    assert pieces.size == pieces.bytes == 0 and pieces.tids == {}

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert sample("agenteval_fragments_unstitched_total", scope=SCOPE, reason="memory") == SPAN_COUNT  # the first
    assert sample("agenteval_fragments_stitched_total", scope=SCOPE) == SPAN_COUNT  # the second, at the drain


def test_near_the_logs_bound_pieces_holding_its_oldest_segment_are_played_as_they_came(tmp_path: Path) -> None:
    """Held pieces never make the log refuse requests: above 80% of ``--wal-max-bytes`` with its
    oldest segment held back by pieces alone, their scope is played as it came, counted."""
    from otel_agenteval.receiver import Receiver, ServeConfig

    bodies = [encode_spans(capture()).SerializeToString(),
              encode_spans(copy_of(capture(), 10**9, 0x5A5A)).SerializeToString()]
    size = max(len(b) for b in bodies) + 64
    # a segment a request; the two requests take above 80% of the log
    cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0, grace_s=0.1, idle_s=60, fragment_linger_s=60,
                      log_violations=False, max_body_bytes=size, wal_dir=str(tmp_path), wal_max_bytes=2 * size,
                      wal_segment_bytes=size // 2)
    r = Receiver(cfg, POLICY, registry=CollectorRegistry()).start()
    try:
        for body in bodies:
            assert post(f"http://127.0.0.1:{r.ports.http}/v1/traces", body, PB)[0] == 200
        wait_until(lambda: r.pipeline.feeder.held_spans == 0 and r.pipeline.engine.fragments.size == 2 * SPAN_COUNT,
                   what="both runs' pieces held")
        s = scrape(r.ports.metrics)  # a checkpoint
        assert value(s, "agenteval_fragments_unstitched_total", scope=SCOPE, reason="buffer_full") == 2 * SPAN_COUNT
        assert value(s, "agenteval_receiver_held_spans") == 0 and value(s, "agenteval_wal_bytes") < size
    finally:
        r.stop()
