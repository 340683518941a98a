"""A/B: what a judge costs the app and ``serve`` when its endpoint is fine, slow (sleeps 5 s) or
failing (HTTP 500): the processor's per-span cost and serve's acknowledged spans per second, each
arm against no judge at all, the arms taking turns round by round (the median round reported).

    python benchmarks/judge_overhead.py [--rounds 9] [--runs 400] [--rate 0.1] [--json]

A local OpenAI-compatible endpoint on loopback plays the judge. The judge's work happens on its
own threads: what this measures is what is left on the span path and on serve's listener (the
sampling decision at a run's end, a queue put), plus the GIL those threads take.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, TrajectoryProcessor

ARMS = ("none", "ok", "sleep", "error")
ANSWER = json.dumps({"choices": [{"message": {"content": json.dumps(
    {"score": 0.8, "label": "pass", "explanation": "fine"})}}]}).encode()


def fake_endpoint(mode: dict[str, str]) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            if mode["arm"] == "sleep":
                time.sleep(5)
            status, body = (500, b"") if mode["arm"] == "error" else (200, ANSWER)
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the judge gave up waiting (timeout)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def policy_for(arm: str, url: str, rate: float) -> Policy:
    if arm == "none":
        return Policy()
    return Policy.from_dict({"judge": {
        "rate": rate, "include_flagged": False, "queue_size": 100,
        "endpoint": {"base_url": url, "model": "judge", "timeout_s": 1.0, "retries": 1, "backoff_s": 0.2,
                     "concurrency": 2},
        "dimensions": {"helpfulness": {"rubric": "Did the agent help?"}}}})


def make_runs(provider: TracerProvider, n: int, start: int = 0) -> int:
    """``n`` runs (an agent span, a model call, three tool calls); the number of spans made."""
    tracer = provider.get_tracer("bench")
    for i in range(start, start + n):
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            with tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 100}):
                pass
            for tool in ("lookup_order", "check_policy", "read_faq"):
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": json.dumps({"order": i})}):
                    pass
    return n * 5


def processor_round(arm: str, url: str, rate: float, runs: int, round_no: int,
                    settle_s: float = 0.0) -> tuple[float, dict[str, float]]:
    """Microseconds per span with this arm's processor, and its judge counters ``settle_s`` later."""
    processor = TrajectoryProcessor(policy_for(arm, url, rate), registry=CollectorRegistry())
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(processor)
    started = time.perf_counter()
    spans = make_runs(provider, runs, round_no * runs)
    took = time.perf_counter() - started
    counts = {}
    if processor.judging is not None:
        time.sleep(settle_s)  # the judge's timeouts and errors land after the spans are long done
        r = processor.metrics.registry
        counts = {k: sum(s.value for m in r.collect() if m.name == f"agenteval_judge_{k}" for s in m.samples
                         if s.name.endswith("_total")) for k in ("sampled", "dropped", "timeouts", "errors")}
    processor.judging and processor.judging.close(0)
    provider.shutdown()
    return took / spans * 1e6, counts


def serve_round(arm: str, url: str, rate: float, bodies: list[bytes], spans: int) -> float:
    """Spans per second serve acknowledged with this arm's judge wired as the command wires it."""
    import urllib.request

    from otel_agenteval.cli.serve import judging_for_serve
    from otel_agenteval.receiver import Receiver, ServeConfig

    policy = policy_for(arm, url, rate)
    registry, judging = judging_for_serve(policy, None)
    hooks: dict[str, Any] = {} if judging is None else {"on_violation": (judging.violation,),
                                                        "on_trajectory": (judging.finished,)}
    cfg = ServeConfig(grpc_port=-1, http_port=0, metrics_port=0, grace_s=0.05, idle_s=1.0, log_violations=False)
    with Receiver(cfg, policy, registry=registry, **hooks) as receiver:
        target = f"http://127.0.0.1:{receiver.ports.http}/v1/traces"
        started = time.perf_counter()
        for body in bodies:
            request = urllib.request.Request(target, data=body, headers={"Content-Type": "application/x-protobuf"})
            with urllib.request.urlopen(request, timeout=30) as response:
                assert response.status == 200
        took = time.perf_counter() - started
    if judging is not None:
        judging.close(0)
    return spans / took


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--runs", type=int, default=400, help="runs per arm per round")
    p.add_argument("--rate", type=float, default=0.1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.runs < 1:
        print("judge_overhead: --rounds and --runs must be >= 1", file=sys.stderr)
        return 2
    mode = {"arm": "none"}
    server, url = fake_endpoint(mode)
    recorder = InMemorySpanExporter()
    rec = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    rec.add_span_processor(SimpleSpanProcessor(recorder))
    spans = make_runs(rec, args.runs)
    recorded = recorder.get_finished_spans()
    bodies = [encode_spans(recorded[i:i + 100]).SerializeToString() for i in range(0, len(recorded), 100)]
    per_span: dict[str, list[float]] = {a: [] for a in ARMS}
    throughput: dict[str, list[float]] = {a: [] for a in ARMS}
    counts: dict[str, dict[str, float]] = {}
    for arm in ARMS:  # a warm-up round, not counted
        mode["arm"] = arm
        processor_round(arm, url, args.rate, args.runs, args.rounds)
        serve_round(arm, url, args.rate, bodies, spans)
    for round_no in range(args.rounds):
        last = round_no == args.rounds - 1
        for arm in ARMS if round_no % 2 == 0 else tuple(reversed(ARMS)):  # turns, both orders
            mode["arm"] = arm
            us, counts[arm] = processor_round(arm, url, args.rate, args.runs, round_no, 2.5 if last else 0.0)
            per_span[arm].append(us)
            throughput[arm].append(serve_round(arm, url, args.rate, bodies, spans))
    server.shutdown()
    base_us, base_tp = statistics.median(per_span["none"]), statistics.median(throughput["none"])
    out = {"rounds": args.rounds, "runs_per_round": args.runs, "rate": args.rate,
           "processor_us_per_span": {a: round(statistics.median(v), 2) for a, v in per_span.items()},
           "processor_ratio_to_none": {a: round(statistics.median(v) / base_us, 3) for a, v in per_span.items()},
           "processor_rounds_us": {a: [round(x, 2) for x in v] for a, v in per_span.items()},
           "processor_no_judge_range_us": [round(min(per_span["none"]), 2), round(max(per_span["none"]), 2)],
           "serve_spans_per_s": {a: round(statistics.median(v)) for a, v in throughput.items()},
           "serve_rounds_spans_per_s": {a: [round(x) for x in v] for a, v in throughput.items()},
           "serve_ratio_to_none": {a: round(statistics.median(v) / base_tp, 3) for a, v in throughput.items()},
           "judge_counts_last_round": counts}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for arm in ARMS:
            print(f"{arm:6} processor {out['processor_us_per_span'][arm]:7.2f} us/span "
                  f"(x{out['processor_ratio_to_none'][arm]})   serve {out['serve_spans_per_s'][arm]:8} spans/s "
                  f"(x{out['serve_ratio_to_none'][arm]})   {counts.get(arm, {})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
