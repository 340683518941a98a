"""The processor inside someone else's process: rules that make spans or sleep, fork, a poisoned
clock, unbounded runs, shutdown, double delivery, deep nesting. Each through the public API."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from conftest import SERVICE, WRITES_ONLY, child_exit_code, ns
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.model.trajectory import ToolStep
from otel_agenteval.rules import applies_to

YEAR_NS = 365 * 86_400 * 10**9


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def processor_with(policy_yaml: str = "", **kwargs: Any) -> tuple[TracerProvider, TrajectoryProcessor, list[Any],
                                                                  list[Any], CollectorRegistry]:
    registry = CollectorRegistry()
    found: list[Any] = []
    done: list[Any] = []
    policy = Policy.from_yaml(policy_yaml, "<test>") if policy_yaml else Policy()
    proc = TrajectoryProcessor(policy, registry=registry, on_violation=[found.append], on_trajectory=[done.append],
                               **kwargs)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(proc)
    return provider, proc, found, done, registry


def agent_run(tracer: Any, tools: list[tuple[str, Any]], agent: str = "support", conv: str | None = None,
              at: float = 0.0) -> None:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
    if conv:
        attrs["gen_ai.conversation.id"] = conv
    root = tracer.start_span(f"invoke_agent {agent}", attributes=attrs, start_time=ns(at))
    ctx = __import__("opentelemetry.trace", fromlist=["set_span_in_context"]).set_span_in_context(root)
    for i, (tool, args) in enumerate(tools):
        s = tracer.start_span(f"execute_tool {tool}", context=ctx, start_time=ns(at + i + 0.1), attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": args if isinstance(args, str) else json.dumps(args)})
        s.end(end_time=ns(at + i + 0.5))
    root.end(end_time=ns(at + len(tools) + 1))


# --- 3. rules run with no lock held ----------------------------------------------------------------

def test_a_rule_that_makes_a_span_neither_hangs_nor_recurses() -> None:
    provider: TracerProvider

    @applies_to((ToolStep,))
    def instrumented(event: Any, check: Any) -> None:
        with provider.get_tracer("judge").start_as_current_span("execute_tool judge", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "judge"}):
            pass  # an instrumented client inside a rule: its span ends on this thread, inside the rule

    provider, proc, found, done, registry = processor_with(rules=[instrumented])
    t = threading.Thread(target=agent_run, args=(provider.get_tracer("app"), [("lookup_order", {"id": 1})] * 3))
    t.start()
    t.join(timeout=10)
    assert not t.is_alive(), "span.end() hung inside the rule"
    stopper = threading.Thread(target=provider.shutdown)
    stopper.start()
    stopper.join(timeout=10)
    assert not stopper.is_alive(), "TracerProvider.shutdown hung"
    assert [x.tool_calls for x in done] == [3]  # the judge's spans are not the agent's
    assert registry.get_sample_value("agenteval_spans_dropped_total", {"reason": "reentrant"}) == 3.0


def test_a_slow_rule_stalls_only_its_own_run() -> None:
    @applies_to((ToolStep,))
    def slow(event: Any, check: Any) -> None:
        if event.tool == "slow_tool":
            time.sleep(0.4)

    provider, proc, found, done, registry = processor_with(rules=[slow])
    tracer = provider.get_tracer("app")
    t = threading.Thread(target=agent_run, args=(tracer, [("slow_tool", {})]))
    t.start()
    time.sleep(0.05)  # the slow rule is running now
    worst = 0.0
    for _ in range(20):
        root = tracer.start_span("invoke_agent other", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                   "gen_ai.agent.name": "other"})
        began = time.perf_counter()
        root.end()
        worst = max(worst, time.perf_counter() - began)
    t.join(timeout=10)
    assert worst < 0.1, f"another thread's span.end() waited {worst:.3f}s for a rule"
    provider.shutdown()


def test_a_rule_waiting_for_a_span_ended_on_another_thread_does_not_deadlock() -> None:
    provider: TracerProvider
    holder: dict[str, Any] = {}

    @applies_to((ToolStep,))
    def waits(event: Any, check: Any) -> None:
        if event.tool != "lookup_order":
            return

        def child() -> None:  # ends a span of the same run from another thread
            from opentelemetry import trace

            ctx = trace.set_span_in_context(holder["root"])
            s = provider.get_tracer("x").start_span("execute_tool side", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "side"})
            s.end()

        w = threading.Thread(target=child)
        w.start()
        w.join(timeout=5)
        assert not w.is_alive()

    provider, proc, found, done, registry = processor_with(rules=[waits])
    tracer = provider.get_tracer("app")
    root = holder["root"] = tracer.start_span("invoke_agent support", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"})
    from opentelemetry import trace

    s = tracer.start_span("execute_tool lookup_order", context=trace.set_span_in_context(root), attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"})
    ender = threading.Thread(target=s.end)
    ender.start()
    ender.join(timeout=10)
    assert not ender.is_alive(), "deadlock: a rule waited for a span of its own run"
    root.end()
    assert sorted(x.tool for x in done[0].steps) == ["lookup_order", "side"]
    provider.shutdown()


# --- 4. fork -----------------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_fork_while_the_lock_is_held_and_with_runs_open() -> None:
    provider, proc, found, done, registry = processor_with(WRITES_ONLY)
    tracer = provider.get_tracer("app")
    open_root = tracer.start_span("invoke_agent support", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"})
    from opentelemetry import trace

    s = tracer.start_span("execute_tool lookup_order", context=trace.set_span_in_context(open_root),
                          attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"})
    s.end()
    assert proc.engine.open_trajectories == 1
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:  # another thread inside the processor's critical section at the fork
        with proc.engine._store.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    pid = os.fork()
    if pid == 0:  # the child: its spans must not hang, and it has none of the parent's runs
        code = 1
        try:
            inherited = proc.engine.open_trajectories
            agent_run(tracer, [("create_claim", {"order_id": "1"})])
            provider.shutdown()
            code = 0 if inherited == 0 and [t.outcome for t in done] == ["unknown"] else 3
        finally:
            os._exit(code)
    release.set()
    holder.join()
    assert child_exit_code(pid, "the forked child hung on its first span end") == 0
    open_root.end()
    assert [t.outcome for t in done] == ["unknown"]  # the parent finishes its own run, once
    provider.shutdown()


# --- 6. the clock ---------------------------------------------------------------------------------

def test_a_span_dated_a_century_ahead_does_not_switch_expiry_off() -> None:
    clock = FakeClock()
    provider, proc, found, done, registry = processor_with(
        WRITES_ONLY + "limits: {trajectory_ttl_s: 10, conversation_ttl_s: 600}", clock=clock)
    tracer = provider.get_tracer("app")
    agent_run(tracer, [("lookup_order", {"id": 1})], agent="forged", at=100 * 365 * 86_400)  # poison
    agent_run(tracer, [("create_claim", {"order_id": "7"})], conv="c1", at=0)
    clock.now = 30 * 10**9
    agent_run(tracer, [("create_claim", {"order_id": "7"})], conv="c1", at=30)  # the next turn, a duplicate
    assert [v.rule for v in found] == ["duplicate_write"]
    idle = [tracer.start_span("invoke_agent idle", attributes={"gen_ai.operation.name": "invoke_agent"})
            for _ in range(100)]
    for root in idle:  # each has a step, then goes quiet
        from opentelemetry import trace

        tracer.start_span("execute_tool t", context=trace.set_span_in_context(root), attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}).end()
    clock.now += 60 * 10**9
    agent_run(tracer, [("lookup_order", {"id": 2})], at=100)
    assert registry.get_sample_value("agenteval_trajectories_evicted_total", {"reason": "ttl"}) == 100.0
    provider.shutdown()


# --- 7. bounded per-run state --------------------------------------------------------------------

def test_a_huge_run_keeps_bounded_maps_and_counts_what_it_drops() -> None:
    provider, proc, found, done, registry = processor_with(
        "tools: {create_claim: {write: true}}\nagents: {'*': {budget: {max_repeats: 3}}}\n"
        "limits: {max_steps_per_trajectory: 100}")
    agent_run(provider.get_tracer("app"), [("create_claim", {"order_id": str(i)}) for i in range(5000)], conv="c")
    (t,) = done
    assert (t.tool_calls, len(t.steps), len(t.writes_ok)) == (5000, 100, 100)
    assert t.conversation is not None and len(t.conversation.writes_ok) == 100
    assert registry.get_sample_value("agenteval_state_dropped_total") == 2 * 4900.0  # writes + repeats
    provider.shutdown()


def test_a_long_lived_host_collects_nothing_more_for_the_conversations_kept() -> None:
    """Each finished run's conversation is kept an hour for its later turns (up to 50,000), and
    each object it holds that Python's cyclic GC tracks is visited by every full collection the
    host makes, on whichever of its threads triggers one. After 300 runs of a new conversation each
    (tool results, a write), about one such object a run remains: the conversation (an object per
    unread tool result and four more made 7 a run here, 12 on the benchmarks' mix, where a
    long-lived process's full collections took twice as long)."""
    proc = TrajectoryProcessor(Policy.from_yaml("tools: {create_claim: {write: true}}", "<test>"),
                               registry=CollectorRegistry())
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(proc)
    tracer = provider.get_tracer("app")
    set_span_in_context = __import__("opentelemetry.trace", fromlist=["set_span_in_context"]).set_span_in_context

    def run(i: int) -> None:
        root = tracer.start_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "gen_ai.conversation.id": f"c-{i}"})
        ctx = set_span_in_context(root)
        tracer.start_span("chat gpt-4o", context=ctx, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 900,
            "gen_ai.usage.output_tokens": 40}).end()
        for tool, args, result in (("lookup_order", {"order_id": f"o-{i}"}, '{"status": "late", "email": "a@b.example"}'),
                                   ("get_policy", {"topic": "refunds"}, "Refunds within 30 days."),
                                   ("create_claim", {"order_id": f"o-{i}"}, f'{{"claim_id": "CL-{i}"}}')):
            tracer.start_span(f"execute_tool {tool}", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": result}).end()
        root.end()

    for i in range(50):  # plans, metric series, caches: made once
        run(i)
    gc.collect()
    before = len(gc.get_objects())
    for i in range(50, 350):
        run(i)
    gc.collect()
    assert len(proc.engine._store.conversations) == 350 and not any(proc.engine.stats["errors"].values())
    per_run = (len(gc.get_objects()) - before) / 300
    assert per_run < 1.5, f"{per_run:.2f} objects the collector tracks kept a run"
    provider.shutdown()


def test_long_names_and_ids_are_kept_bounded() -> None:
    provider, proc, found, done, registry = processor_with(WRITES_ONLY)
    long_tool = "t" * 100_000
    agent_run(provider.get_tracer("app"), [(long_tool, {"a": "x" * 100_000})], conv="c" * 100_000)
    (t,) = done
    assert len(t.steps[0].tool) <= 256 and len(t.conversation_id or "") <= 256
    assert len(t.steps[0].call_key[1]) <= 512
    provider.shutdown()


# --- 8. lifecycle ----------------------------------------------------------------------------------

def test_runs_opened_after_shutdown_are_ignored_and_counted() -> None:
    provider, proc, found, done, registry = processor_with()
    proc.shutdown()
    agent_run(provider.get_tracer("app"), [("lookup_order", {})])
    assert done == [] and proc.engine.open_trajectories == 0
    assert registry.get_sample_value("agenteval_spans_dropped_total", {"reason": "after_shutdown"}) == 2.0


def test_a_tool_span_delivered_twice_counts_once() -> None:
    provider, proc, found, done, registry = processor_with(WRITES_ONLY)
    tracer = provider.get_tracer("app")
    from opentelemetry import trace

    root = tracer.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                 "gen_ai.agent.name": "support"})
    s = tracer.start_span("execute_tool create_claim", context=trace.set_span_in_context(root), attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
        "gen_ai.tool.call.arguments": '{"order_id": "1"}'})
    s.end()
    proc.on_end(s)  # a second delivery (two processors sharing one, a buggy exporter chain)
    root.end()
    proc.on_end(s)  # and once more after the run is over
    assert [(t.outcome, t.tool_calls) for t in done] == [("unknown", 1)]
    assert found == []
    assert registry.get_sample_value("agenteval_spans_dropped_total", {"reason": "duplicate"}) == 1.0
    assert registry.get_sample_value("agenteval_late_spans_total") == 1.0
    provider.shutdown()


# --- 9. deep nesting -------------------------------------------------------------------------------

DEEP = r'''
import json
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.model.arguments import normalise_value
from otel_agenteval.model.trajectory import ToolStep

done = []
proc = TrajectoryProcessor(Policy.from_yaml("tools: {create_claim: {write: true}}", "<t>"),
                           registry=CollectorRegistry(), on_trajectory=[done.append])
provider = TracerProvider()
provider.add_span_processor(proc)
tracer = provider.get_tracer("x")
from opentelemetry import trace
deep = "[" * 75_000 + "]" * 75_000
nested = {"a": 1}
for _ in range(75_000):
    nested = {"a": nested}
root = tracer.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"})
for args in (deep, deep, '{"x": ' + deep + '}'):
    s = tracer.start_span("execute_tool create_claim", context=trace.set_span_in_context(root), attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
        "gen_ai.tool.call.arguments": args})
    s.end()
root.end()
step = ToolStep("create_claim", 0, 1, 1, 1, raw_arguments=nested)  # a recorded span may carry anything
assert step.call_key[0] == "create_claim"
normalise_value(nested)
print(json.dumps({"calls": done[0].tool_calls, "errors": proc.stats()["errors"]}))
'''


def test_arguments_nested_75000_deep_neither_crash_nor_escape() -> None:
    out = subprocess.run([sys.executable, "-c", DEEP], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["calls"] == 3
    assert sum(got["errors"].values()) == 0


def test_absurd_token_counts_are_read_as_zero_not_an_error() -> None:
    provider, proc, found, done, registry = processor_with(
        "agents: {'*': {budget: {max_tokens: 1000, max_cost_usd: 1}}}")
    tracer = provider.get_tracer("app")
    from opentelemetry import trace

    root = tracer.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"})
    tracer.start_span("chat", context=trace.set_span_in_context(root), attributes={
        "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 2**1100,
        "gen_ai.usage.output_tokens": 5}).end()
    root.end()
    assert [(t.input_tokens, t.output_tokens) for t in done] == [(0, 5)]
    assert sum(proc.stats()["errors"].values()) == 0
    provider.shutdown()
