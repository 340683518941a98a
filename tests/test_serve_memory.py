"""``serve --memory-limit-mib``: a light run of ``benchmarks/memory_budget.py`` (the benchmark holds
40k 64 KiB spans under 256 MiB and sends 100 concurrent 15 MiB uploads): held big spans and
concurrent big uploads keep the peak RSS under limit + idle baseline + 150 MiB, refusals carry
a retry hint and are counted, traces played early are counted with their reason."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from google.rpc.error_details_pb2 import RetryInfo
from prometheus_client import CollectorRegistry
from serve_support import GATE, scrape, value, wait_until

from otel_agenteval import Policy
from otel_agenteval.receiver import Receiver, ServeConfig

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
MIB = 1 << 20


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("memory_budget", BENCH / "memory_budget.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_budget"] = module
    spec.loader.exec_module(module)
    return module


def test_held_big_spans_and_concurrent_uploads_stay_within_the_budget():
    bench = _bench()
    # 5,000 held 64 KiB spans (~320 MiB) and 20 concurrent 3 MiB uploads against a 48 MiB budget:
    # without a byte budget all of it is held (the RSS grows by ~330 MiB)
    out = bench.run(limit_mib=48, held=5000, uploads=20, upload_mib=3, attempts=3, idle_s=300)
    print(json.dumps(out))
    assert out["peak_rss_mib"] <= out["bound_mib"], out
    assert out["traces_played_for_memory"] > 0, out  # the oldest held traces, played early
    assert out["memory_limited_requests"] > 0 and out["upload_statuses"].get(429, 0) > 0, out
    assert set(out["upload_statuses"]) <= {200, 429} and set(out["held_statuses"]) <= {200, 429}, out
    # nothing acknowledged is lost: every 200 was counted as accepted spans
    assert out["accepted_spans"] == 16 * out["held_statuses"].get(200, 0) + 48 * out["upload_statuses"].get(200, 0)


def test_grpc_over_the_budget_is_resource_exhausted_with_retry_info():
    """Held traces past half the budget are played early; with the engine stalled (a custom rule
    that waits) the queue fills the rest and gRPC answers RESOURCE_EXHAUSTED with RetryInfo."""
    bench = _bench()
    cfg = ServeConfig(grpc_port=0, http_port=-1, metrics_port=0, memory_limit_mib=8, max_body_bytes=2 * MIB,
                      log_violations=False, idle_s=300)
    policy = Policy.from_dict({"custom_rules": ["serve_support:gate_rule"]})
    r = Receiver(cfg, policy, registry=CollectorRegistry()).start()
    GATE.clear()
    try:
        codes = []
        with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                         request_serializer=None, response_deserializer=None)
            for i in range(10):
                body = bench.held_request(24, 64 * 1024, random.Random(i))  # a trace of ~1.5 MiB, reserved at 3
                try:
                    export(body, timeout=10)
                    codes.append("OK")
                except grpc.RpcError as exc:
                    codes.append(exc.code().name)
                    assert "memory limit" in (exc.details() or "")
                    retry = RetryInfo()
                    retry.ParseFromString(dict(exc.trailing_metadata() or ())["google.rpc.retryinfo-bin"])
                    assert retry.retry_delay.seconds == cfg.retry_after_s
        assert codes[:3] == ["OK"] * 3 and "RESOURCE_EXHAUSTED" in codes, codes
        s = scrape(r.ports.metrics)
        assert value(s, "agenteval_receiver_requests_total", protocol="grpc",
                     result="memory_limited") == codes.count("RESOURCE_EXHAUSTED")
        assert value(s, "agenteval_receiver_memory_limit_bytes") == 8 * MIB
        assert value(s, "agenteval_receiver_memory_bytes", kind="spans") <= 8 * MIB
        GATE.set()
        wait_until(lambda: value(scrape(r.ports.metrics), "agenteval_receiver_traces_total", reason="memory") >= 1,
                   what="the oldest held trace counted as played for memory")
    finally:
        GATE.set()
        r.stop()


def budget_used(bench: Any, port: int) -> float:
    return sum(v for k, v in bench.scrape(port).items() if k.startswith("agenteval_receiver_memory_bytes"))


def test_a_burst_leaves_the_process_where_it_was():
    """After a burst of big uploads the allocator gives the freed heap back, and counts it: RSS
    returns to what the warmed-up replica held before it. It kept 23-52 MiB more before the trim
    waited for the burst's last objects to be freed, and 10-26 MiB more (a listener thread's
    arena's free top, which malloc_trim cannot return) before serve ran glibc with one arena."""
    bench = _bench()
    serve = bench.Serve("--memory-limit-mib", "64", "--max-body-bytes", str(7 * MIB), "--idle-timeout", "6",
                        "--max-held-spans", "1000000")
    try:
        bench.send_uploads(serve.http, 4, 6, 3)  # warm up: first-use code paths, buffers, caches
        wait_until(lambda: budget_used(bench, serve.metrics) == 0, 20, "the budget emptied")
        time.sleep(2.0)
        warm = bench.rss(serve.proc.pid) / MIB
        trims = bench.scrape(serve.metrics)["agenteval_receiver_allocator_trims_total"]
        for _ in range(2):
            statuses = bench.send_uploads(serve.http, 30, 6, 10)  # ~180 MiB offered against 64, retried as told
            assert statuses.get(200, 0) == 30 and statuses.get(429, 0) > 0, statuses
            wait_until(lambda: budget_used(bench, serve.metrics) == 0, 60, "the budget emptied after the burst")
            time.sleep(3.0)  # the fall lasts SETTLE_S (1 s), then the feeder thread trims
            after = bench.rss(serve.proc.pid) / MIB
            assert after <= warm + 16, (warm, after)
            now = bench.scrape(serve.metrics)["agenteval_receiver_allocator_trims_total"]
            assert now > trims, "the trim after the burst was counted"
            trims = now
    finally:
        serve.stop()


def test_the_trim_waits_for_the_fall_to_last_and_follows_every_wave(monkeypatch: Any) -> None:
    """The allocator is trimmed once use has stayed down for SETTLE_S, not at the first fall; and
    a wave after a trim in the middle of a burst (the retried uploads) is trimmed too."""
    from otel_agenteval.receiver import memory

    trims: list[float] = []
    monkeypatch.setattr(memory, "trim", lambda: trims.append(0.0) or True)
    held = [0]
    budget = memory.MemoryBudget(64 * MIB, lambda: held[0])
    assert budget.reserve_body(28 * MIB)  # the burst: 56 MiB reserved
    budget.release_body(28 * MIB)
    assert budget.trim_after_burst(100.0) is False  # fell, but only now
    assert budget.trim_after_burst(100.0 + memory.SETTLE_S / 2) is False
    assert budget.trim_after_burst(100.0 + memory.SETTLE_S) is True and len(trims) == 1
    assert budget.trim_after_burst(200.0) is False  # nothing new to give back
    assert budget.reserve_body(6 * MIB)  # a retried upload: 12 MiB
    budget.release_body(6 * MIB)
    budget.trim_after_burst(300.0)
    assert budget.trim_after_burst(300.0 + memory.SETTLE_S) is True and len(trims) == 2
    assert budget.reserve_body(MIB)  # a small request: 2 MiB, not worth a trim
    budget.release_body(MIB)
    budget.trim_after_burst(400.0)
    assert budget.trim_after_burst(400.0 + memory.SETTLE_S) is False and len(trims) == 2
