"""``serve`` replicas behind the real OpenTelemetry Collector: spans/s and CPU per million spans for
1, 2 and 3 replicas, with and without ``--wal-dir``; and recovery time after ``kill -9`` with
100k runs open. Not a timed test: ``.venv/bin/python benchmarks/scaling.py [--rounds 3] [--json]``.

The Collector is the one the tests run (``.ci/build-collector.sh``), with the shipped
``deploy/collector/otelcol-compose.yaml`` pointed at the replicas on loopback (static resolver,
routing by trace id, gzip between the Collector and the replicas). The client (this process)
records ``--workload`` (the processor benchmark's, default pydantic-ai: 14 spans a run) through
the SDK once, encodes it in ``--batch``-span requests, re-keys the trace ids for every round,
and sends them to the Collector over OTLP/gRPC (uncompressed, as the SDK does by default) from
``--threads`` threads. A round is timed from the first request to the moment the replicas'
``agenteval_spans_total`` add up to every span sent. CPU: user+sys of every replica and of the
Collector over the round, per million spans. The machine is shared (2 cores for everything:
client, Collector and replicas): read the figures as ratios between set-ups of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from collector_support import COMPOSE_CONFIG, collector_binary, loopback_config, wait_healthy  # noqa: E402
from serve_throughput import (  # noqa: E402
    POLICY,
    POLICY_FILE,
    proc_cpu,
    record,
    rekeyed,
    requests_of,
    send_grpc,
    spans_counted,
)
from wal_support import duplicate_run  # noqa: E402

from otel_agenteval.receiver.config import ServeConfig  # noqa: E402


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_replica(wal: Path | None, grace: float, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--policy", str(POLICY_FILE), "--grpc-port", "0",
           "--http-port", "0", "--metrics-port", "0", "--grace", str(grace), "--queue-spans", "200000",
           "--max-held-spans", "1000000", "--no-log-violations", *extra]
    if wal is not None:
        cmd += ["--wal-dir", str(wal)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def one_setup(replicas: int, wal: bool, template: list[Any], copies: int, rounds: int, threads: int,
              work: Path, wal_workers: int) -> dict[str, Any]:
    # with the log a gRPC request waits for its group's sync: more handler threads share a sync
    servers = [start_replica(work / f"wal-{replicas}-{i}" if wal else None, 0.2,
                             ("--grpc-workers", str(wal_workers)) if wal else ()) for i in range(replicas)]
    ports = {k: _free_port() for k in ("grpc", "http", "health", "metrics")}
    config = loopback_config(COMPOSE_CONFIG, [f"127.0.0.1:{info['grpc_port']}" for _, info in servers],
                             ports["grpc"], ports["http"], ports["health"], ports["metrics"])
    import yaml

    path = work / f"otelcol-{replicas}-{int(wal)}.yaml"
    path.write_text(yaml.safe_dump(config))
    log = work / f"otelcol-{replicas}-{int(wal)}.log"
    with open(log, "wb") as out:
        col = subprocess.Popen([collector_binary(), "--config", str(path)], stdout=out, stderr=subprocess.STDOUT,
                               env={**os.environ, "AGENTEVAL_TOKEN": ""})
    results = []
    try:
        wait_healthy(ports["health"], col, log)
        for r in range(rounds):
            bodies = rekeyed(template, copies, 1000 * replicas + 100 * int(wal) + r)
            spans = copies * sum(_spans_in(t) for t in template)
            before = sum(sum(spans_counted(info["metrics_port"])) for _, info in servers)
            cpu0 = [proc_cpu(p.pid) for p, _ in servers]
            ccpu0 = proc_cpu(col.pid)
            t0 = time.perf_counter()
            send_grpc(ports["grpc"], bodies, threads)
            while sum(sum(spans_counted(info["metrics_port"])) for _, info in servers) - before < spans:
                time.sleep(0.1)
            wall = time.perf_counter() - t0
            serve_cpu = sum(proc_cpu(p.pid) - c for (p, _), c in zip(servers, cpu0))
            col_cpu = proc_cpu(col.pid) - ccpu0
            results.append({"spans_per_s": spans / wall, "serve_cpu_s_per_mspans": serve_cpu / spans * 1e6,
                            "collector_cpu_s_per_mspans": col_cpu / spans * 1e6})
    finally:
        col.send_signal(signal.SIGTERM)
        col.wait(30)
        for p, _ in servers:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
    return {"replicas": replicas, "wal": wal, "rounds": results,
            **{k: statistics.median(x[k] for x in results) for k in results[0]}}


def _spans_in(req: Any) -> int:
    return sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)


def recovery(runs: int, work: Path) -> dict[str, Any]:
    """``runs`` runs (an agent span and two writes each) held open (a long grace), ``kill -9``,
    restart: how long until listening again with all of them held."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for i in range(runs):
        duplicate_run(tracer, i, tools=0)
    spans = list(memory.get_finished_spans())
    bodies = [encode_spans(spans[i:i + 512]).SerializeToString() for i in range(0, len(spans), 512)]
    wal = work / "wal-recovery"
    limits = ("--max-held-spans", str(4 * runs), "--queue-spans", "200000", "--idle-timeout", "3600")
    proc, info = start_replica(wal, 3000, limits)
    send_grpc(info["grpc_port"], bodies, 2, "gzip")  # as the Collector sends: logged gzipped
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    log_bytes = sum(p.stat().st_size for p in wal.iterdir() if p.name.isdigit())
    t0 = time.perf_counter()
    proc, info = start_replica(wal, 3000, limits)
    listening = time.perf_counter() - t0
    with open(f"/proc/{proc.pid}/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    with urllib.request.urlopen(f"http://127.0.0.1:{info['metrics_port']}/metrics", timeout=30) as r:
        text = r.read().decode()
    held = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("agenteval_receiver_held_traces ")]
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return {"open_runs": runs, "spans": len(spans), "log_bytes": log_bytes,
            "restart_to_listening_s": round(listening, 2), "rss_bytes_after": rss, "held_traces_after": held[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="pydantic-ai", choices=("pydantic-ai", "lean", "tool-heavy"))
    p.add_argument("--spans", type=int, default=40_000, help="spans a round (default %(default)s)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=4, help="client threads (default %(default)s)")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--replicas", default="1,2,3")
    p.add_argument("--wal-grpc-workers", type=int, default=4, help="--grpc-workers with the log (default %(default)s)")
    p.add_argument("--recovery-runs", type=int, default=100_000, help="open runs for the recovery figure (0: skip)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    POLICY_FILE.write_text(POLICY)
    spans = record(args.workload, 200)
    template = requests_of(spans, args.batch)
    copies = max(1, args.spans // len(spans))
    out: dict[str, Any] = {"workload": args.workload, "spans_per_round": copies * len(spans),
                           "wal_sync_s": ServeConfig().wal_sync_s, "wal_grpc_workers": args.wal_grpc_workers,
                           "setups": []}
    with tempfile.TemporaryDirectory(prefix="agenteval-scaling-") as tmp:
        work = Path(tmp)
        for n in (int(x) for x in args.replicas.split(",") if x):
            for wal in (False, True):
                got = one_setup(n, wal, template, copies, args.rounds, args.threads, work, args.wal_grpc_workers)
                out["setups"].append(got)
                if not args.json:
                    print(f"{n} replica(s), WAL {'on ' if wal else 'off'}: {got['spans_per_s']:8.0f} spans/s, "
                          f"serve {got['serve_cpu_s_per_mspans']:5.1f} CPU-s/M spans, "
                          f"Collector {got['collector_cpu_s_per_mspans']:5.1f} CPU-s/M spans", flush=True)
        if args.recovery_runs:
            out["recovery"] = recovery(args.recovery_runs, work)
            if not args.json:
                print(f"recovery: {out['recovery']}")
    if args.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
