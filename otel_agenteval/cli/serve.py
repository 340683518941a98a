"""``otel-agenteval serve``: receive OTLP traces, check trajectories, serve the metrics."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import signal
import sys
import threading
from typing import Any

from ..metrics.evaluation_events import EvaluationEvents, with_events
from ..receiver.config import LOOPS, ConfigError, ServeConfig, read_token
from ..receiver.malloc import tune_for_large_bodies
from .errors import finite, positive_seconds, seconds

HELP = "receive OTLP traces (gRPC and HTTP), check every trajectory, serve Prometheus metrics"

_D = ServeConfig()
GC_THRESHOLD = 50_000  # allocations between young collections (the default is 700)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT), 2 for a bad setting, policy or address "
                "(one line), 1 when the drain timed out. "
                "One JSON line on stdout tells the bound ports once every listener is up. See docs/serve.md.")
    p.add_argument("--policy", metavar="FILE",
                   help="policy YAML (default: none; writes inferred from tool names, see docs/rules.md)")
    g = p.add_argument_group("listeners")
    g.add_argument("--addr", default=_D.addr,
                   help="address to bind all listeners (default %(default)s; a non-loopback one needs a token or --insecure)")
    g.add_argument("--grpc-port", type=int, default=_D.grpc_port,
                   help="OTLP/gRPC port (default %(default)s; 0 picks a free port, -1 turns it off)")
    g.add_argument("--http-port", type=int, default=_D.http_port,
                   help="OTLP/HTTP port, POST /v1/traces (default %(default)s; 0 picks a free port, -1 turns it off)")
    g.add_argument("--metrics-port", type=int, default=_D.metrics_port,
                   help="/metrics, /healthz and /readyz port (default %(default)s; 0 picks a free port)")
    g.add_argument("--grpc-workers", type=int, default=_D.grpc_workers,
                   help="gRPC handler threads (default %(default)s: decoding and checking hold the GIL, so more "
                        "threads only take turns at it, ~5%% more CPU a span with 4; more overlap only the "
                        "inflating of gzip messages)")
    g.add_argument("--loop", choices=LOOPS, default=_D.loop,
                   help="event loop of the HTTP listeners: uvloop (comes with the serve extra; its transport is "
                        "in C, less CPU a request) or the standard library's asyncio; auto picks uvloop when it is "
                        "installed (default %(default)s)")
    c = p.add_argument_group("trace completion")
    c.add_argument("--grace", type=seconds, default=_D.grace_s, metavar="SECONDS",
                   help="after a trace's root span arrives, wait this long for late child spans (default %(default)s)")
    c.add_argument("--idle-timeout", type=positive_seconds, default=_D.idle_s, metavar="SECONDS",
                   help="play a trace whose root never came after this long without a new span; its unfinished "
                        "runs count as incomplete (default %(default)s)")
    c.add_argument("--fragment-linger", type=seconds, default=_D.fragment_linger_s, metavar="SECONDS",
                   help="pieces of runs that arrive a trace each (an instrumentation that does not propagate "
                        "context) are put back together once their instrumentation scope sent none for this long; "
                        "above the exporters' batch delay (5 s by default) (default %(default)s)")
    c.add_argument("--max-held-spans", type=int, default=_D.max_held_spans,
                   help="spans held while traces complete; past it the oldest trace is played early (default %(default)s)")
    b = p.add_argument_group("bounds and backpressure")
    b.add_argument("--queue-spans", type=int, default=_D.queue_spans,
                   help="ingest queue bound in spans; when full, HTTP answers 429 and gRPC RESOURCE_EXHAUSTED, "
                        "with a retry delay (default %(default)s)")
    b.add_argument("--high-water", type=finite, default=_D.high_water,
                   help="/readyz fails while the queue holds more than this share of --queue-spans (default %(default)s)")
    b.add_argument("--max-body-bytes", type=int, default=_D.max_body_bytes,
                   help="largest request body, and largest gunzipped body (413 past it; default %(default)s)")
    b.add_argument("--max-spans-per-request", type=int, default=_D.max_spans_per_request,
                   help="most spans in one request (413 past it; default %(default)s)")
    b.add_argument("--body-timeout", type=positive_seconds, default=_D.body_timeout_s, metavar="SECONDS",
                   help="a request body must arrive within this long (408 past it; default %(default)s)")
    b.add_argument("--memory-limit-mib", type=int, default=_D.memory_limit_mib, metavar="MIB",
                   help="one budget for request bodies being read, queued batches and held spans; past it 429 / "
                        "RESOURCE_EXHAUSTED with a retry delay, and held traces past half of it are played early "
                        "(default: half the container's cgroup memory limit, else a quarter of RAM)")
    b.add_argument("--max-connections", type=int, default=_D.max_connections, metavar="N",
                   help="open connections per listener; past it a new connection closes the one idle the longest "
                        "(or gets 503 when all are busy) (default: the descriptor limit less 100, shared by the listeners that are on)")
    b.add_argument("--http-idle-timeout", type=float, default=_D.http_idle_s, metavar="SECONDS",
                   help="close a connection with no request in progress after this long, on every listener "
                        "(default %(default)s)")
    b.add_argument("--http-read-timeout", type=float, default=_D.http_read_s, metavar="SECONDS",
                   help="a request's headers must arrive within this long (slow senders are cut off; "
                        "default %(default)s)")
    b.add_argument("--retry-after", type=int, default=_D.retry_after_s, metavar="SECONDS",
                   help="retry delay given to throttled clients (Retry-After, RetryInfo; default %(default)s)")
    w = p.add_argument_group("durability (docs/serve.md#durability)")
    w.add_argument("--wal-dir", metavar="DIR",
                   help="write-ahead log: every request is synced here before it is acknowledged, and the runs "
                        "open at a crash are rebuilt from it at start (default: none, a crash loses open runs)")
    w.add_argument("--wal-sync", type=float, default=_D.wal_sync_s, metavar="SECONDS",
                   help="group sync interval: at most one fsync per interval, each acknowledgement waits for its "
                        "group's (default %(default)s)")
    w.add_argument("--wal-max-bytes", type=int, default=_D.wal_max_bytes,
                   help="bound of the log on disk; past it (or on a full disk) requests are refused with 429 / "
                        "RESOURCE_EXHAUSTED (default %(default)s)")
    s = p.add_argument_group("security")
    s.add_argument("--token-file", metavar="FILE", help="require 'Authorization: Bearer <token>', token read from FILE")
    s.add_argument("--token-env", metavar="VAR", help="the same, token read from environment variable VAR")
    s.add_argument("--metrics-token-file", metavar="FILE",
                   help="the token /metrics needs (default: the OTLP token, when one is set), read from FILE")
    s.add_argument("--metrics-token-env", metavar="VAR", help="the same, read from environment variable VAR")
    s.add_argument("--tls-cert", metavar="PEM", help="serve TLS on every listener with this certificate (with --tls-key)")
    s.add_argument("--tls-key", metavar="PEM", help="private key for --tls-cert")
    s.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --addr without a token (spans from anyone who can reach it)")
    p.add_argument("--no-log-violations", action="store_true", help="do not log a line per violation (metrics only)")
    p.add_argument("--otlp-logs-endpoint", metavar="URL",
                   help="send each violation as a gen_ai.evaluation.result log record on its span to this "
                        "OTLP/HTTP logs endpoint (e.g. http://collector:4318/v1/logs)")
    p.add_argument("--shutdown-delay", type=seconds, default=0.0, metavar="SECONDS",
                   help="on SIGTERM, report not ready and keep accepting this long before stopping, so load "
                        "balancers (the Collector's DNS resolver) stop sending first (default %(default)s)")
    p.add_argument("--drain-timeout", type=positive_seconds, default=30.0, metavar="SECONDS",
                   help="on SIGTERM, wait at most this long to drain the queue and finalise (default %(default)s)")


def _config(args: argparse.Namespace) -> ServeConfig:
    return ServeConfig(
        addr=args.addr, grpc_port=args.grpc_port, http_port=args.http_port, metrics_port=args.metrics_port,
        grace_s=args.grace, idle_s=args.idle_timeout, fragment_linger_s=args.fragment_linger, queue_spans=args.queue_spans, high_water=args.high_water,
        max_held_spans=args.max_held_spans, max_body_bytes=args.max_body_bytes,
        max_spans_per_request=args.max_spans_per_request, body_timeout_s=args.body_timeout,
        retry_after_s=args.retry_after, token=read_token(args.token_file, args.token_env),
        metrics_token=read_token(args.metrics_token_file, args.metrics_token_env, "--metrics-token"),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key, insecure=args.insecure, grpc_workers=args.grpc_workers,
        log_violations=not args.no_log_violations, loop=args.loop, max_connections=args.max_connections,
        http_idle_s=args.http_idle_timeout, http_read_s=args.http_read_timeout, memory_limit_mib=args.memory_limit_mib,
        wal_dir=args.wal_dir, wal_sync_s=args.wal_sync, wal_max_bytes=args.wal_max_bytes,
    ).validate()


def evaluation_logs(endpoint: str | None, policy: Any) -> tuple[Any, EvaluationEvents] | None:
    """``--otlp-logs-endpoint``: a LoggerProvider batching to it, and the events sinks on it."""
    if not endpoint:
        return None
    if not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"invalid --otlp-logs-endpoint: {endpoint!r} (an http:// or https:// URL)")
    try:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    except ImportError:
        raise ConfigError("--otlp-logs-endpoint needs opentelemetry-exporter-otlp-proto-http installed") from None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(resource=Resource.create({"service.name": "otel-agenteval"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint)))
    out = policy.outputs
    return provider, EvaluationEvents(provider, runs=out.evaluation_runs, ids_in_clear=out.evaluation_ids_in_clear)


def judging_for_serve(policy: Any, events: EvaluationEvents | None) -> tuple[Any, Any]:
    """The registry and the policy's judge (``None`` when off), whose series go in that registry."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    if not policy.judge.enabled:
        return registry, None
    from ..judging.sink import judging_for

    return registry, judging_for(policy.judge, None, registry, events)


def run(args: argparse.Namespace) -> int:
    from ..policy.policy import Policy
    from ..receiver.compression import inflaters
    from .check_policy import load_policy

    try:
        from ..receiver.server import Receiver
    except ImportError as exc:  # uvicorn and friends come with the serve extra
        print(f"otel-agenteval serve: {exc}; install the serve extra: pip install 'otel-agenteval[serve]'",
              file=sys.stderr)
        return 2

    from .logs import json_to_stderr

    json_to_stderr(logging.WARNING)  # violations and errors: JSON lines on stderr; stdout has the 'listening' line only
    # a bad setting or policy raises (ConfigError, PolicyError): exit 2, one line a problem (cli_errors)
    config = _config(args)
    policy = load_policy(args.policy) if args.policy else Policy()
    outcomes: dict[str, int] = {}
    allocator = tune_for_large_bodies()  # before the listeners' threads start

    def tally(t: Any) -> None:
        outcomes[t.outcome] = outcomes.get(t.outcome, 0) + 1

    try:
        events = evaluation_logs(args.otlp_logs_endpoint, policy)
        on_violation, on_trajectory = with_events(events[1] if events else None, (), (tally,))
        registry, judging = judging_for_serve(policy, events[1] if events else None)
        if judging is not None:  # the judge's workers: a sampled run is queued, never waited for
            on_violation, on_trajectory = (*on_violation, judging.violation), (*on_trajectory, judging.finished)
        receiver = Receiver(config, policy, registry=registry, on_violation=on_violation, on_trajectory=on_trajectory)
    except ConfigError as exc:
        print(f"otel-agenteval serve: {exc}", file=sys.stderr)
        return 2
    try:
        receiver.start()
    except OSError as exc:
        print(f"otel-agenteval serve: {exc}", file=sys.stderr)
        return 2
    if receiver.durability is not None:  # what the write-ahead log gave back, and what it cut
        print(json.dumps(receiver.durability.summary), file=sys.stderr, flush=True)
    # this process is ours alone: what start-up loaded stays out of the cyclic GC's way, and a
    # request's thousands of short-lived objects (freed by reference counting) trigger it rarely
    gc.freeze()
    gc.set_threshold(max(gc.get_threshold()[0], GC_THRESHOLD), *gc.get_threshold()[1:])
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    p = receiver.ports
    in_force = f"{args.policy}: {policy.in_force}" if args.policy else policy.in_force
    scheme = "https" if config.tls else "http"
    print(json.dumps({"event": "listening", "addr": config.addr, "grpc_port": p.grpc, "http_port": p.http,
                      "metrics_port": p.metrics, "metrics_url": f"{scheme}://{config.addr}:{p.metrics}/metrics",
                      "tls": config.tls, "auth": config.token is not None,
                      "metrics_auth": config.scrape_token is not None, "malloc": allocator,
                      "loop": receiver.loop, "gzip": inflaters(), "wal": config.wal_dir,
                      "policy": in_force}), flush=True)
    print(json.dumps({"event": "policy", "policy": in_force}), file=sys.stderr, flush=True)
    if judging is not None:  # what leaves this process for the judge, said once at start
        print(json.dumps({"event": "judge", "rate": policy.judge.rate, "dimensions": list(policy.judge.dimensions),
                          "fields_sent": judging.fields_sent}), file=sys.stderr, flush=True)
    while not stop.wait(1.0):
        pass
    print(json.dumps({"event": "draining", "queued_spans": receiver.pipeline.queue.spans,
                      "held_spans": receiver.pipeline.feeder.held_spans + receiver.pipeline.engine.fragments.size}), file=sys.stderr, flush=True)
    receiver.stop(args.drain_timeout, args.shutdown_delay)
    if judging is not None:
        judging.close()
    if events is not None:
        events[0].shutdown()  # what the batch holds goes out
    done = receiver.pipeline.finished.is_set()
    print(json.dumps({"event": "stopped", "drained": done, "traces": dict(receiver.pipeline.feeder.completed),
                      "trajectories": outcomes, "lost": receiver.pipeline.lost}),
          file=sys.stderr, flush=True)
    return 0 if done else 1
