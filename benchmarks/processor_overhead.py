"""Per-span cost of ``TrajectoryProcessor`` on top of the SDK with a ``BatchSpanProcessor``.

Three arms, each its own ``TracerProvider`` running the *same* span-creation code:

- ``baseline``  BatchSpanProcessor(no-op exporter)
- ``empty``     baseline + a SpanProcessor that does nothing (the noise floor of a 2nd processor)
- ``agenteval`` baseline + TrajectoryProcessor

Many short rounds, arm order rotated and reversed every other round; the median per-span time
of each arm is compared (these machines are noisy). Then the processor alone: recorded spans
replayed straight into ``on_start``/``on_end`` (no SDK, no BatchSpanProcessor), timed by kind.

    python benchmarks/processor_overhead.py [--rounds N] [--runs-per-round N] [--json] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import io
import json
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, TrajectoryProcessor

TARGET, GOAL = 1.10, 1.05
SPANS_PER_RUN = 14  # 1 agent + 5 chat + 8 tool
ERROR_EVERY = 8  # one run in eight has a failing tool call

POLICY = Policy.from_dict({
    "tools": {"create_claim": {"write": True}},
    "agents": {"*": {"budget": {"max_steps": 40, "max_llm_calls": 20, "max_tokens": 200_000,
                                "max_cost_usd": 5.0, "max_duration_s": 600}}},
    "pricing": {"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}},
    "outcome": {"success_when": ["create_claim"]},
})

# (tool, arguments template, result): the write tool's arguments carry the run number, so no
# run repeats an earlier identical write (no violations fire; the mix measures the clean path).
TOOLS = (
    ("lookup_order", '{"order_id":"RUN"}', '{"status":"delivered","items":2}'),
    ("get_policy", '{"topic":"damaged_delivery"}', "Damaged items can be refunded within 30 days."),
    ("search_kb", '{"query":"damaged item refund","top_k":3}', '[{"id":"kb-12","score":0.91}]'),
    ("get_customer", '{"customer_id":"c-CONV"}', '{"tier":"gold","since":"2021-04-02"}'),
    ("check_inventory", '{"sku":"SKU-1182"}', '{"in_stock":14}'),
    ("create_claim", '{"order_id":"RUN","reason":"damaged"}', '{"claim_id":"CL-RUN"}'),
    ("get_shipping", '{"order_id":"RUN"}', '{"carrier":"ups","eta_days":2}'),
    ("send_email", '{"template":"claim_opened"}', "queued"),
)


class ToolRetry(Exception):
    """What a framework raises when a tool call fails (recorded on the span as an exception)."""


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class EmptyProcessor(SpanProcessor):
    """A second processor that does nothing: the cost of being the SDK's 2nd processor."""

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        pass


class Recorder(SpanProcessor):
    """Keeps (phase, span) in call order; at start a snapshot, as attributes were then."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        snap = span._readable_span()  # shares the live attributes: give it a frozen copy of them now
        snap._attributes = BoundedAttributes(attributes=dict(span.attributes or {}), immutable=True)
        self.calls.append(("start", snap))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append(("end", span))


def agent_run(tracer: trace.Tracer, run: int) -> None:
    """One agent run shaped like pydantic-ai's: agent span, 5 chat spans, 8 tool spans (flat)."""
    conv = f"conv-{run // 3}"  # a conversation spans three runs
    common = {"gen_ai.agent.name": "support_agent", "gen_ai.conversation.id": conv}
    agent_attrs = {"gen_ai.operation.name": "invoke_agent", "model_name": "gpt-4o",
                   "gen_ai.agent.call.id": f"run-{run}", **common}
    failing = 2 if run % ERROR_EVERY == 0 else -1
    with tracer.start_as_current_span("invoke_agent support_agent", attributes=agent_attrs) as agent:
        tool_i = 0
        for turn in range(5):
            with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT,
                                              attributes={"gen_ai.operation.name": "chat", **common}) as chat:
                chat.set_attribute("gen_ai.request.model", "gpt-4o")
                chat.set_attribute("gen_ai.response.model", "gpt-4o-2024-08-06")
                chat.set_attribute("gen_ai.usage.input_tokens", 900 + 250 * turn)
                chat.set_attribute("gen_ai.usage.output_tokens", 40 + turn)
            if turn == 4:
                break
            for _ in range(2):
                tool, args, result = TOOLS[tool_i]
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                         "gen_ai.tool.call.id": f"call_{run}_{tool_i}",
                         "gen_ai.tool.call.arguments": args.replace("RUN", str(run)).replace("CONV", str(run // 3)), **common}
                try:
                    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs) as span:
                        if tool_i == failing:
                            span.set_attribute("gen_ai.tool.call.result", "order service timed out")
                            raise ToolRetry("order service timed out")
                        span.set_attribute("gen_ai.tool.call.result", result.replace("RUN", str(run)))
                except ToolRetry:
                    pass
                tool_i += 1
        agent.set_attribute("final_result", f"I have opened claim CL-{run} for you.")
        agent.set_attribute("gen_ai.aggregated_usage.input_tokens", 7000)
        agent.set_attribute("gen_ai.aggregated_usage.output_tokens", 210)


# --- arms: one provider each, built once ----------------------------------------------------------
class Arm:
    def __init__(self, name: str, extra: SpanProcessor | None) -> None:
        self.name = name
        self.provider = TracerProvider(resource=Resource.create({"service.name": "bench-support"}))
        self.bsp = BatchSpanProcessor(NoopExporter())
        self.provider.add_span_processor(self.bsp)
        self.extra = extra
        if extra is not None:
            self.provider.add_span_processor(extra)
        self.tracer = self.provider.get_tracer("bench")
        self.next_run = 0
        self.per_span_ns: list[float] = []  # wall clock
        self.cpu_per_span_ns: list[float] = []  # process CPU time (all threads): less hurt by other processes

    def round(self, runs: int) -> tuple[float, float]:
        """Run ``runs`` agent runs: per-span wall and CPU ns. The BSP queue is drained first, untimed."""
        self.bsp.force_flush()
        gc.collect()
        tracer, start = self.tracer, self.next_run
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        for run in range(start, start + runs):
            agent_run(tracer, run)
        elapsed = time.perf_counter_ns() - t0
        cpu = time.process_time_ns() - c0
        self.next_run = start + runs
        n = runs * SPANS_PER_RUN
        return elapsed / n, cpu / n

    def shutdown(self) -> None:
        self.provider.shutdown()


VIOLATIONS: list[Any] = []  # the mix is meant to be clean: any violation here is a benchmark bug


def make_processor() -> TrajectoryProcessor:
    return TrajectoryProcessor(POLICY, registry=CollectorRegistry(), on_violation=[VIOLATIONS.append])


def measure_arms(rounds: int, runs: int, warmup: int, gc_off: bool) -> tuple[list[Arm], list[float]]:
    arms = [Arm("baseline", None), Arm("empty", EmptyProcessor()), Arm("agenteval", make_processor())]
    orders = [arms[i:] + arms[:i] for i in range(len(arms))]
    paired: list[float] = []
    if gc_off:
        gc.disable()
    try:
        for r in range(warmup + rounds):
            order = orders[(r // 2) % len(orders)]
            if r % 2:
                order = order[::-1]  # swap order every other round
            got = {arm.name: arm.round(runs) for arm in order}
            if r >= warmup:
                for arm in arms:
                    arm.per_span_ns.append(got[arm.name][0])
                    arm.cpu_per_span_ns.append(got[arm.name][1])
                paired.append(got["agenteval"][0] / got["baseline"][0])
    finally:
        gc.enable()
    for arm in arms:
        arm.shutdown()
    proc = arms[2].extra
    assert isinstance(proc, TrajectoryProcessor)
    stats = proc.stats()
    expected = (warmup + rounds) * runs
    if stats["spans"]["agent"] != expected or sum(stats["errors"].values()) or VIOLATIONS:
        raise SystemExit(f"processor did not see the mix as expected: {stats}, {len(VIOLATIONS)} violations")
    return arms, paired


# --- the processor alone --------------------------------------------------------------------------
def record(runs: int) -> list[tuple[str, Any]]:
    rec = Recorder()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-support"}))
    provider.add_span_processor(rec)
    tracer = provider.get_tracer("bench")
    for run in range(runs):
        agent_run(tracer, 1_000_000 + run)
    return rec.calls


def _kind(span: Any) -> str:
    return {"invoke_agent": "agent", "chat": "chat", "execute_tool": "tool"}[span.attributes["gen_ai.operation.name"]]


def replay(calls: list[tuple[str, Any]], proc: TrajectoryProcessor) -> int:
    on_start, on_end = proc.on_start, proc.on_end
    t0 = time.perf_counter_ns()
    for phase, span in calls:
        if phase == "start":
            on_start(span)
        else:
            on_end(span)
    return time.perf_counter_ns() - t0


def replay_by_kind(calls: list[tuple[str, Any]], proc: TrajectoryProcessor) -> dict[tuple[str, str], int]:
    """ns spent per (phase, kind), each call timed on its own, minus the cost of the timer."""
    clock = time.perf_counter_ns
    kinds = [(phase, _kind(span)) for phase, span in calls]
    t_empty = min(-(clock() - clock()) for _ in range(2000))
    out: dict[tuple[str, str], int] = {}
    on_start, on_end = proc.on_start, proc.on_end
    for (phase, span), key in zip(calls, kinds):
        fn = on_start if phase == "start" else on_end
        t0 = clock()
        fn(span)
        dt = clock() - t0 - t_empty
        out[key] = out.get(key, 0) + dt
    return out


def measure_alone(runs: int, repeats: int) -> dict[str, Any]:
    calls = record(runs)
    spans = len(calls) // 2
    gc.collect()
    gc.freeze()  # the recorded spans are not the processor's garbage: keep collections off them
    try:
        times = []
        for _ in range(repeats):
            gc.collect()
            times.append(replay(calls, make_processor()))
        gc.collect()
        by_kind = replay_by_kind(calls, make_processor())
    finally:
        gc.unfreeze()
    best = statistics.median(times)
    counts = {"agent": runs, "chat": 5 * runs, "tool": 8 * runs}
    return {
        "method": "recorded SDK spans replayed into on_start/on_end directly (no SDK, no BatchSpanProcessor); "
                  "fresh processor per pass, GC on, recorded spans gc.freeze()d",
        "spans": spans,
        "us_per_span": best / spans / 1e3,
        "spans_per_s": spans / (best / 1e9),
        "us_per_span_by_kind": {
            f"{phase}:{kind}": ns / counts[kind] / 1e3 for (phase, kind), ns in sorted(by_kind.items())
        },
    }


def profile_alone(runs: int, top: int) -> str:
    calls = record(runs)
    proc = make_processor()
    prof = cProfile.Profile()
    prof.enable()
    replay(calls, proc)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def callgrind_arm(name: str, runs: int) -> None:
    """Run one arm for valgrind: ``runs`` warm-up runs, then ``runs`` runs inside ``functools.reduce``,
    the function to toggle collection on (``--collect-atstart=no --toggle-collect=functools_reduce``)."""
    extra = {"baseline": None, "empty": EmptyProcessor(), "agenteval": make_processor()}[name]
    arm = Arm(name, extra)
    for run in range(runs):
        agent_run(arm.tracer, run)
    arm.bsp.force_flush()
    gc.collect()

    def measured(_: Any, __: Any) -> None:
        for run in range(runs, 2 * runs):
            agent_run(arm.tracer, run)

    functools.reduce(measured, [0], None)
    arm.shutdown()


# --- report ---------------------------------------------------------------------------------------
def summarise(arms: list[Arm], paired: list[float], alone: dict[str, Any], args: argparse.Namespace,
              seconds: float) -> dict[str, Any]:
    med = {a.name: statistics.median(a.per_span_ns) / 1e3 for a in arms}
    cpu = {a.name: statistics.median(a.cpu_per_span_ns) / 1e3 for a in arms}
    q = {a.name: statistics.quantiles(a.per_span_ns, n=4) for a in arms}
    return {
        "python": platform.python_version(),
        "rounds": args.rounds, "runs_per_round": args.runs_per_round, "warmup_rounds": args.warmup,
        "spans_per_run": SPANS_PER_RUN, "gc": "disabled during rounds" if args.gc_off else "enabled (collected before each round)",
        "us_per_span": med,
        "us_per_span_iqr": {k: [v[0] / 1e3, v[2] / 1e3] for k, v in q.items()},
        "ratio": med["agenteval"] / med["baseline"],
        "ratio_empty": med["empty"] / med["baseline"],
        "ratio_paired_median": statistics.median(paired),
        "cpu_us_per_span": cpu,
        "ratio_cpu": cpu["agenteval"] / cpu["baseline"],
        "added_us_per_span": med["agenteval"] - med["baseline"],
        "processor_alone": alone,
        "seconds": seconds,
    }


def print_table(s: dict[str, Any]) -> None:
    print(f"python {s['python']}, {s['rounds']} rounds x {s['runs_per_round']} runs x {s['spans_per_run']} spans "
          f"(+{s['warmup_rounds']} warm-up rounds), GC {s['gc']}")
    print(f"{'arm':<34}{'us/span median':>15}{'IQR':>16}{'ratio':>8}{'cpu us/span':>13}{'ratio':>8}")
    base = s["us_per_span"]["baseline"]
    labels = {"baseline": "SDK + BatchSpanProcessor(no-op)", "empty": "  + empty SpanProcessor",
              "agenteval": "  + TrajectoryProcessor"}
    for name, label in labels.items():
        lo, hi = s["us_per_span_iqr"][name]
        us = s["us_per_span"][name]
        cpu, cpu_base = s["cpu_us_per_span"][name], s["cpu_us_per_span"]["baseline"]
        print(f"{label:<34}{us:>15.2f}{f'{lo:.2f}-{hi:.2f}':>16}{us / base:>7.3f}x{cpu:>13.2f}{cpu / cpu_base:>7.3f}x")
    a = s["processor_alone"]
    print(f"\nprocessor alone ({a['method']}):")
    print(f"  {a['us_per_span']:.2f} us/span, {a['spans_per_s']:,.0f} spans/s over {a['spans']} spans")
    print("  by call and kind (us per span of that kind): " +
          ", ".join(f"{k} {v:.2f}" for k, v in a["us_per_span_by_kind"].items()))
    print(f"\npaired per-round ratio (median): {s['ratio_paired_median']:.3f}x; "
          f"empty second processor: {s['ratio_empty']:.3f}x; added {s['added_us_per_span']:.2f} us/span; "
          f"{s['seconds']:.0f} s")
    print(f"overhead ratio: {s['ratio']:.2f}x (target <= {TARGET:.2f}x, goal {GOAL:.2f}x)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=30, help="measured rounds per arm (default 30)")
    p.add_argument("--runs-per-round", type=int, default=200, help="agent runs per round (default 200, 14 spans each)")
    p.add_argument("--warmup", type=int, default=4, help="rounds run first and discarded (default 4)")
    p.add_argument("--gc-off", action="store_true", help="disable the garbage collector during rounds")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--profile", action="store_true", help="also cProfile the processor alone and print the top functions")
    p.add_argument("--callgrind-arm", choices=("baseline", "empty", "agenteval"),
                   help="only run this arm for valgrind's instruction count (see benchmarks/README.md)")
    args = p.parse_args(argv)
    if args.callgrind_arm:
        callgrind_arm(args.callgrind_arm, args.runs_per_round)
        return 0
    if args.rounds < 2 or args.runs_per_round < 1 or args.warmup < 0:
        p.error("--rounds must be >= 2, --runs-per-round >= 1, --warmup >= 0")
    t0 = time.perf_counter()
    arms, paired = measure_arms(args.rounds, args.runs_per_round, args.warmup, args.gc_off)
    alone = measure_alone(runs=1000, repeats=7)
    s = summarise(arms, paired, alone, args, time.perf_counter() - t0)
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        print()
    else:
        print_table(s)
    if args.profile:
        print(profile_alone(runs=2000, top=30), file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
