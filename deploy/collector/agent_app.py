"""A multi-process agent app that only exports spans over OTLP, as a web app's workers do.

Each worker process has its own ``TracerProvider`` with a ``BatchSpanProcessor`` and the SDK's
``OTLPSpanExporter`` (to the Collector, or straight to ``otel-agenteval serve``) and runs the
demo's simulated support agent. Nothing is checked in the workers: ``serve`` does it, for all
of them at once. ``--report`` also attaches the in-process processor to each worker (on its own
registry) and prints, as JSON, what each worker found, so the totals can be compared.

    python deploy/collector/agent_app.py --workers 4 --runs 100 --endpoint http://127.0.0.1:4318
    python deploy/collector/agent_app.py --workers 2 --forever --rate 1 --endpoint http://collector:4318
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue as queue_mod
import random
import signal
import sys
import time
from typing import Any


def worker(i: int, args: argparse.Namespace, results: Any) -> None:
    results.put(_work(i, args))


def _work(i: int, args: argparse.Namespace) -> dict[str, Any]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from prometheus_client import CollectorRegistry, generate_latest

    from otel_agenteval import Policy, TrajectoryProcessor
    from otel_agenteval.cli.demo_world import SupportWorld

    if args.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=args.endpoint.removeprefix("http://"), insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]

        exporter = OTLPSpanExporter(endpoint=args.endpoint.rstrip("/") + "/v1/traces")
    provider = TracerProvider(resource=Resource.create({"service.name": args.service_name,
                                                        "service.instance.id": f"worker-{i}"}))
    registry = CollectorRegistry()
    if args.report:
        import structlog

        structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is the report
        policy = Policy.from_file(args.policy) if args.policy else Policy()
        provider.add_span_processor(TrajectoryProcessor(policy, registry=registry))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65536))
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    world = SupportWorld(provider.get_tracer("agent-app"), random.Random(args.seed + i), time.time_ns())
    done = 0
    t0 = time.monotonic()
    while not stop and (args.forever or done < args.runs):
        if args.rate > 0:
            wait = t0 + done / args.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            world.clock = max(world.clock, time.time_ns())
        world.run()
        done += 1
    provider.shutdown()  # flushes the exporter
    return {"worker": i, "runs": done, "metrics": generate_latest(registry).decode() if args.report else ""}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Agent runs from several worker processes, exported over OTLP.")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=50, help="runs per worker")
    ap.add_argument("--forever", action="store_true")
    ap.add_argument("--rate", type=float, default=0.0, help="runs per second per worker (0: as fast as possible)")
    ap.add_argument("--endpoint", default="http://127.0.0.1:4318", help="OTLP endpoint (HTTP; host:port for gRPC)")
    ap.add_argument("--protocol", choices=("http", "grpc"), default="http")
    ap.add_argument("--service-name", default="support-web")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--policy", help="policy YAML for --report")
    ap.add_argument("--report", action="store_true", help="also check in each worker; print what each found (JSON)")
    args = ap.parse_args(argv)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(i, args, queue), name=f"worker-{i}") for i in range(args.workers)]
    for p in procs:
        p.start()

    def forward(signum: int, _frame: Any) -> None:  # stop the workers; each flushes its exporter
        for p in procs:
            if p.pid is not None and p.is_alive():
                p.terminate()

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    results: list[dict[str, Any]] = []
    while len(results) < len(procs):
        try:
            results.append(queue.get(timeout=1))
        except queue_mod.Empty:  # stop waiting once no worker is left to answer
            if not any(p.is_alive() for p in procs) and queue.empty():
                break
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        print("agent_app: a worker failed", file=sys.stderr)
        return 1
    results.sort(key=lambda r: r["worker"])
    json.dump({"workers": results}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
