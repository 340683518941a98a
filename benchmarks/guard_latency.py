"""How long ``guard.check`` takes, and what a guard hook adds to a pydantic-ai tool call.

Not a test: prints figures (see benchmarks/README.md, "guard_latency.py").

State: each conversation is an open agent run with 30 earlier tool calls (5 of them writes, 2 of
them confirmation tools that said yes), 6 model calls, and a budget, a price table, scope,
ordering and forbidden_if rules in the policy, so every built-in guard rule has work. The checked
call runs inside its own open tool span, as the hooks call it. Wall-clock percentiles per call
(perf_counter) and the CPU time per call over the batch (thread_time: what a busy box's
preemption leaves out); the hook's cost in CPU time, median of paired runs.

Cases: ``confirmed_write`` (a refund its confirmation covers: allowed, the confirmation promised),
``duplicate_write`` (blocked: recorded on the span, counted), ``read`` (an in-scope read).
``--conversations 1000``: 1,000 such runs open at once, the checks going round them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Span, TracerProvider
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.cli.build import build_name

POLICY = r"""
tools:
  lookup_order: {}
  get_policy: {}
  check_fraud: {}
  ask_user_confirmation: {}
  create_claim: {write: true}
  issue_refund: {write: true, requires_confirmation: true, confirm_arguments: [amount], requires_before: [lookup_order]}
  update_payment: {write: true, forbidden_if: [{after: check_fraud, result_matches: '"flagged":\s*true'}]}
confirmation:
  tools: [ask_user_confirmation]
agents:
  support:
    allowed_tools: [lookup_order, get_policy, check_fraud, ask_user_confirmation, create_claim, issue_refund,
                    update_payment]
    budget: {max_steps: 200, max_cost_usd: 5.0, max_tokens: 1000000, max_duration_s: 3600}
pricing:
  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10}
"""


def tool_span(tracer: trace.Tracer, parent: Span, name: str, args: dict[str, Any]) -> Span:
    span = tracer.start_span(f"execute_tool {name}", context=trace.set_span_in_context(parent), attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": json.dumps(args)})
    assert isinstance(span, Span)
    return span


def conversation(tracer: trace.Tracer, n: int) -> Span:
    """An open run with 30 earlier calls: 5 writes, 2 confirmations, 6 model calls."""
    root = tracer.start_span("invoke_agent support", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "gen_ai.conversation.id": f"c-{n}"})
    assert isinstance(root, Span)
    calls: list[tuple[str, dict[str, Any], str]] = []
    for i in range(23):
        calls.append(("lookup_order" if i % 2 else "get_policy", {"order_id": f"{n}-{i}"}, '{"status": "ok"}'))
    calls += [("create_claim", {"order_id": f"{n}-w{i}", "reason": "damaged"}, '{"claim_id": "C"}') for i in range(4)]
    calls += [("ask_user_confirmation", {"tool": "issue_refund", "amount": a}, '{"confirmed": true}') for a in (25, 30)]
    calls.append(("update_payment", {"account": f"{n}", "card": "4111"}, "ok"))  # the fifth write
    for i, (name, args, result) in enumerate(calls):
        if i % 5 == 0:
            chat = tracer.start_span("chat gpt-4o", context=trace.set_span_in_context(root), attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 80})
            chat.end()
        span = tool_span(tracer, root, name, args)
        span.set_attribute("gen_ai.tool.call.result", result)
        span.end()
    return root


CASES = {
    "confirmed_write": ("issue_refund", lambda n: {"order_id": f"{n}-x", "amount": 25}),
    "duplicate_write": ("create_claim", lambda n: {"order_id": f"{n}-w0", "reason": "damaged"}),
    "read": ("lookup_order", lambda n: {"order_id": f"{n}-new"}),
}


def measure(case: str, conversations: int, calls: int, warmup: int) -> dict[str, Any]:
    processor = TrajectoryProcessor(Policy.from_yaml(POLICY), registry=CollectorRegistry())
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    guard = processor.guard(tracer_provider=provider)
    tool, args_of = CASES[case]
    roots = [conversation(tracer, n) for n in range(conversations)]
    spans = [tool_span(tracer, root, tool, args_of(n)) for n, root in enumerate(roots)]
    contexts = [trace.set_span_in_context(s) for s in spans]
    arguments = [args_of(n) for n in range(conversations)]
    expect_allowed = case != "duplicate_write"
    d = guard.check(tool, arguments[0], context=contexts[0])
    assert d.allowed == expect_allowed, d
    times: list[int] = []
    clock = time.perf_counter_ns
    check = guard.check
    k = len(contexts)
    cpu0 = 0
    for i in range(warmup + calls):
        if i == warmup:
            cpu0 = time.thread_time_ns()
        j = i % k
        ctx, a = contexts[j], arguments[j]
        t0 = clock()
        check(tool, a, context=ctx)
        t1 = clock()
        if i >= warmup:
            times.append(t1 - t0)
    cpu_us = (time.thread_time_ns() - cpu0) / calls / 1000  # CPU time: what preemption on a busy box leaves out
    for s in spans:
        s.end()
    for r in roots:
        r.end()
    provider.shutdown()
    times.sort()

    def pct(p: float) -> float:
        return times[min(len(times) - 1, int(p / 100 * len(times)))] / 1000

    return {"case": case, "conversations": conversations, "calls": calls, "p50_us": pct(50), "p95_us": pct(95),
            "p99_us": pct(99), "mean_us": statistics.fmean(times) / 1000, "cpu_us_per_call": cpu_us}


def hook_cost(runs: int, calls_per_run: int) -> dict[str, Any]:
    """A pydantic-ai run whose model asks for ``calls_per_run`` in-scope reads, with and without
    the GuardTools capability (the processor on the provider either way): the difference per call."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from otel_agenteval.guard.hooks.pydantic_ai import GuardTools

    processor = TrajectoryProcessor(Policy.from_yaml(POLICY), registry=CollectorRegistry())
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(processor)
    guard = processor.guard(tracer_provider=provider)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": f"o-{i}"}, tool_call_id=f"c{i}")
                                    for i in range(calls_per_run)])  # one turn of parallel calls

    def agent(guarded: bool) -> Agent[None, str]:
        a = Agent(FunctionModel(model, model_name="gpt-4o"), name="support",
                  capabilities=[GuardTools(guard)] if guarded else [])
        a.instrument = InstrumentationSettings(tracer_provider=provider)

        @a.tool_plain
        def lookup_order(order_id: str) -> str:
            return "ok"

        return a

    arms = {"plain": agent(False), "guarded": agent(True)}
    per: dict[str, list[float]] = {name: [] for name in arms}
    for r in range(runs + 5):
        for name in (("plain", "guarded") if r % 2 else ("guarded", "plain")):
            t0 = time.thread_time_ns()  # CPU time of this thread (the run's event loop): preemption left out
            asyncio.run(arms[name].run("go", conversation_id=f"{name}-{r}"))
            if r >= 5:
                per[name].append((time.thread_time_ns() - t0) / calls_per_run / 1000)
    provider.shutdown()
    plain, guarded = statistics.median(per["plain"]), statistics.median(per["guarded"])
    paired = sorted(g - p for p, g in zip(per["plain"], per["guarded"]))
    return {"case": "pydantic-ai hook", "runs": runs, "calls_per_run": calls_per_run,
            "per_call_us_plain": plain, "per_call_us_guarded": guarded, "hook_us_per_call": guarded - plain,
            "hook_us_paired_iqr": (paired[len(paired) // 4], paired[3 * len(paired) // 4])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--warmup", type=int, default=10_000)
    p.add_argument("--conversations", type=int, nargs="*", default=[1, 1000])
    p.add_argument("--hook-runs", type=int, default=40, help="pydantic-ai runs per arm (0: skip)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = [measure(case, n, args.calls, args.warmup) for n in args.conversations for case in CASES]
    if args.hook_runs:
        out.append(hook_cost(args.hook_runs, 20))
    print(f"# build: {build_name()}; python {sys.version.split()[0]}", file=sys.stderr)
    for row in out:
        if args.json:
            print(json.dumps(row))
        elif "p50_us" in row:
            print(f"{row['case']:16} conversations={row['conversations']:5}  p50 {row['p50_us']:6.1f} us  "
                  f"p95 {row['p95_us']:6.1f} us  p99 {row['p99_us']:6.1f} us  mean {row['mean_us']:6.1f} us  "
                  f"cpu {row['cpu_us_per_call']:5.1f} us/call")
        else:
            lo, hi = row["hook_us_paired_iqr"]
            print(f"{row['case']:16} CPU per tool call: plain {row['per_call_us_plain']:.0f} us, guarded "
                  f"{row['per_call_us_guarded']:.0f} us, hook {row['hook_us_per_call']:+.1f} us "
                  f"(paired rounds IQR {lo:+.1f} .. {hi:+.1f} us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
