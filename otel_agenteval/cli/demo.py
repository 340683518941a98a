"""``otel-agenteval demo``: a simulated support agent, traced, checked and counted live."""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from ..model.summary import RunSummary
from ..policy.policy import Policy
from ..processor import TrajectoryProcessor
from .errors import non_negative, port, seconds

HELP = "Run a simulated customer-support agent through the processor; serve /metrics; print a summary."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, default=300, help="agent runs to simulate (default 300)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    p.add_argument("--policy", help="policy YAML (default: the built-in support policy)")
    p.add_argument("--port", type=port, default=9464, help="port for /metrics (default 9464; 0 picks a free one)")
    p.add_argument("--addr", default="127.0.0.1", help="address for /metrics (default 127.0.0.1)")
    p.add_argument("--no-serve", action="store_true", help="do not serve /metrics")
    p.add_argument("--rate", type=non_negative, default=0.0, help="runs per second (default 0: as fast as possible)")
    p.add_argument("--forever", action="store_true", help="keep running until stopped (SIGINT/SIGTERM)")
    p.add_argument("--linger", type=seconds, default=0.0, help="keep serving /metrics this many seconds at the end")
    p.add_argument("--service-name", default="support-demo", help="resource service.name")
    p.add_argument("--format", choices=("table", "json"), default="table", help="summary format")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="log violations and stopped calls to stderr as they are found, sampled as in "
                        "production (the first 10 of a kind in 10 s, then one in 100; the summary counts every one)")
    p.add_argument("--traces-out", metavar="FILE",
                   help="also record the spans as OTLP JSON lines (.gz ok), for `replay` and `score`")


def run(args: argparse.Namespace) -> int:
    from .demo_world import DEMO_POLICY, SupportWorld

    if args.runs < 0 or args.rate < 0:
        print("demo: --runs and --rate must be >= 0", file=sys.stderr)
        return 2
    # a bad policy raises PolicyError: exit 2, one line a problem (cli_errors)
    policy = Policy.from_file(args.policy) if args.policy else Policy.from_dict(DEMO_POLICY, "built-in policy")
    _configure_logging(args.verbose)
    registry = CollectorRegistry()
    summary = RunSummary()
    processor = TrajectoryProcessor(policy, registry=registry, on_violation=[summary.add_violation],
                                    on_trajectory=[summary.add_trajectory])
    provider = TracerProvider(resource=Resource.create({"service.name": args.service_name}))
    provider.add_span_processor(processor)
    if args.traces_out:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from ..replay.write import OTLPJsonLinesExporter

        try:
            provider.add_span_processor(BatchSpanProcessor(OTLPJsonLinesExporter(args.traces_out),
                                                           max_queue_size=65536, max_export_batch_size=512))
        except OSError as exc:
            print(f"demo: cannot write {args.traces_out}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    tracer = provider.get_tracer("otel_agenteval.demo")
    metrics_url = ""
    if not args.no_serve:
        from ..metrics.exposition import serve

        try:
            server = serve(args.port, args.addr, registry)
        except OSError as exc:
            print(f"demo: cannot serve /metrics on {args.addr}:{args.port}: {exc.strerror or exc}"
                  " (use --port or --no-serve)", file=sys.stderr)
            return 2
        metrics_url = f"http://{args.addr}:{server.port}/metrics"
        print(f"serving metrics on {metrics_url}", file=sys.stderr)

    stop = False

    def _stop(*_: Any) -> None:
        nonlocal stop
        stop = True

    old = signal.signal(signal.SIGTERM, _stop)
    world = SupportWorld(tracer, random.Random(args.seed), time.time_ns(), processor.guard(tracer_provider=provider))
    # --forever has no total: "runs 311", not "runs 311/300"
    progress = _Progress(0 if args.forever else args.runs, enabled=not args.quiet and args.format == "table")
    done = 0
    t0 = time.monotonic()
    try:
        while not stop and (args.forever or done < args.runs):
            if args.rate > 0:
                wait = t0 + done / args.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                world.clock = max(world.clock, time.time_ns())
            world.run()
            done += 1
            progress.update(done, summary)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
    provider.shutdown()
    progress.close()
    if args.format == "json":
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        print(summary.render_table())
    if not args.quiet:
        print(next_steps(args.traces_out), file=sys.stderr)
    if args.linger > 0 and not args.no_serve:
        time.sleep(args.linger)
    if metrics_url and not stop and sys.stdout.isatty():  # a person is watching: keep /metrics up for them
        print(f"still serving {metrics_url} (curl -s {metrics_url} | grep agenteval_violations_total); "
              "Ctrl-C to stop", file=sys.stderr, flush=True)
        _wait_for_interrupt()
    return 0


def next_steps(traces: str | None) -> str:
    """The three commands to try after the demo: record runs, write a policy from them, check them."""
    runs = traces or "runs.jsonl.gz"
    record = (f"otel-agenteval demo --runs 200 --no-serve --traces-out {runs}" if not traces
              else f"ls -l {runs}")
    steps = [(record, "record some runs" if not traces else "the runs just recorded"),
             (f"otel-agenteval init --from {runs} -o agenteval.yaml", "a starter policy from them"),
             (f"otel-agenteval replay {runs} --policy agenteval.yaml", "check the runs against it")]
    width = max(66, *(len(command) + 2 for command, _ in steps))  # a long path never runs into its comment
    return "\nnext:\n" + "\n".join(f"  {command:<{width}}# {comment}" for command, comment in steps)


def _wait_for_interrupt() -> None:
    """Until Ctrl-C or SIGTERM."""
    import threading

    done = threading.Event()
    old = signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)


def _configure_logging(verbose: bool) -> None:
    """The demo is an application: it may configure structlog (to stderr, quiet by default)."""
    import logging

    import structlog

    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING if verbose else logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


class _Progress:
    """A one-line progress display on a TTY; sparse lines otherwise."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def update(self, done: int, s: RunSummary) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < (0.1 if self.tty else 5.0) and done != self.total:
            return
        self.last = now
        of = f"/{self.total}" if self.total else ""
        line = f"runs {done}{of}  violations {sum(s.violations.values())}  critical {s.critical}"
        if self.tty:
            sys.stderr.write("\r" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
