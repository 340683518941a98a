"""``TrajectoryProcessor(background=True)``: span ends handed to one consumer thread, bounded.

The same findings and metrics as checking inline, once flushed; ``span.end()`` never waits for a
rule; a full queue drops and counts; reentrant spans, shutdown and fork behave as inline.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
from conftest import child_exit_code
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from serve_support import ALL_RULES, ALL_RULES_POLICY, record_all_rules

from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.model.trajectory import ToolStep
from otel_agenteval.rules import builtin_rules

WRITES = "tools: {create_claim: {write: true}}\n"


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in registry.collect():
        for s in fam.samples:
            if s.name.startswith("agenteval_") and not s.name.startswith(("agenteval_queued", "agenteval_build")):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _findings(h: Any) -> list[tuple[str, str | None, str, str]]:
    return sorted((v.rule, v.tool, v.agent, v.trace_id) for v in h.violations)


def test_background_finds_what_inline_finds(make_processor: Any) -> None:
    inline = make_processor(ALL_RULES_POLICY)
    background = make_processor(ALL_RULES_POLICY, background=True)
    record_all_rules(inline)
    record_all_rules(background)
    assert background.processor.force_flush(10_000)
    assert {r for r, *_ in _findings(inline)} == ALL_RULES
    assert [f[:3] for f in _findings(background)] == [f[:3] for f in _findings(inline)]
    assert len(background.trajectories) == len(inline.trajectories)
    a, b = _samples(inline.registry), _samples(background.registry)
    differ = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys()
              if k[0] != "agenteval_spans_dropped_total" and abs((a.get(k) or 0) - (b.get(k) or 0)) > 1e-9
              and not k[0].endswith(("_created", "_seconds_sum"))}
    assert not differ
    assert background.value("agenteval_queued_spans") == 0.0


def _slow_rule(seconds: float, seen: list[str]) -> Any:
    def rule(event: Any, check: Any) -> None:
        if isinstance(event, ToolStep):
            time.sleep(seconds)
            seen.append(event.tool)
    return rule


def _run(h: Any, tools: list[str], agent: str = "support") -> list[float]:
    """One run; the seconds each tool span's ``end()`` took."""
    root = h.agent(agent, 0.0)
    took = []
    for i, tool in enumerate(tools):
        span = h.start(f"execute_tool {tool}", root, 1.0 + i, {"gen_ai.operation.name": "execute_tool",
                                                                "gen_ai.tool.name": tool,
                                                                "gen_ai.tool.call.arguments": f'{{"n": {i}}}'})
        t0 = time.perf_counter()
        span.end()
        took.append(time.perf_counter() - t0)
    h.end(root, 10.0)
    return took


def test_end_does_not_wait_for_a_slow_rule(make_processor: Any) -> None:
    seen: list[str] = []
    rules = [*builtin_rules().values(), _slow_rule(0.2, seen)]
    h = make_processor(WRITES, rules=rules, background=True)
    took = _run(h, ["lookup_order", "create_claim", "send_email"])
    assert max(took) < 0.1, took  # inline, each end() would take the rule's 0.2 s
    assert h.processor.force_flush(10_000)
    assert seen == ["lookup_order", "create_claim", "send_email"]
    assert [t.tool_calls for t in h.trajectories] == [3]


def test_a_full_queue_drops_and_counts_and_never_blocks(make_processor: Any) -> None:
    inside, release = threading.Event(), threading.Event()

    def gate(event: Any, check: Any) -> None:
        if isinstance(event, ToolStep) and event.tool == "gate":
            inside.set()
            release.wait(10)

    h = make_processor(WRITES, rules=[gate], background=True, max_queue_size=5)
    root = h.agent("support", 0.0)
    h.tool(root, "gate", {}, at=1.0)
    assert inside.wait(5)  # the consumer is held inside the rule
    t0 = time.perf_counter()
    for i in range(20):
        h.tool(root, "lookup_order", {"n": i}, at=2.0 + i)
    assert time.perf_counter() - t0 < 1.0
    assert h.value("agenteval_queued_spans") == 5.0
    assert h.value("agenteval_spans_dropped_total", reason="queue_full") == 15.0
    assert not h.processor.force_flush(100)  # still held: the flush says it did not finish
    release.set()
    h.end(root, 30.0)
    assert h.processor.force_flush(10_000)
    assert [t.tool_calls for t in h.trajectories] == [6]  # the gate and the five that were queued


def test_a_span_made_by_a_rule_is_dropped_as_reentrant(make_processor: Any) -> None:
    made: list[Any] = []

    def judge(event: Any, check: Any) -> None:
        if isinstance(event, ToolStep) and made:
            made[0].start_span("judge").end()

    h = make_processor(WRITES, rules=[judge], background=True)
    made.append(h.tracer)
    _run(h, ["lookup_order", "send_email"])
    assert h.processor.force_flush(10_000)
    assert h.value("agenteval_spans_dropped_total", reason="reentrant") == 2.0
    assert [t.tool_calls for t in h.trajectories] == [2]


def test_shutdown_checks_what_is_queued_then_counts_later_spans(make_processor: Any) -> None:
    seen: list[str] = []
    h = make_processor(WRITES, rules=[_slow_rule(0.05, seen)], background=True)
    _run(h, ["a", "b", "c"])
    h.provider.shutdown()
    assert seen == ["a", "b", "c"] and len(h.trajectories) == 1
    h.end(h.start("execute_tool late", None, 50.0, {"gen_ai.operation.name": "execute_tool"}), 51.0)
    assert h.value("agenteval_spans_dropped_total", reason="after_shutdown") == 1.0


def test_shutdown_gives_up_on_a_backlog_behind_a_slow_rule(make_processor: Any, monkeypatch: Any) -> None:
    import otel_agenteval.engine.handoff as handoff

    monkeypatch.setattr(handoff, "SHUTDOWN_DRAIN_S", 0.3)
    seen: list[str] = []
    h = make_processor(WRITES, rules=[_slow_rule(0.1, seen)], background=True)
    _run(h, [f"t{i}" for i in range(40)])  # 4 s of checks queued
    t0 = time.perf_counter()
    h.provider.shutdown()
    assert time.perf_counter() - t0 < 2.0
    dropped = h.value("agenteval_spans_dropped_total", reason="shutdown_timeout")
    assert 30 <= dropped <= 39 and len(seen) + dropped >= 40


def test_a_rule_that_exits_does_not_stop_the_checks(make_processor: Any) -> None:
    def exits(event: Any, check: Any) -> None:
        if isinstance(event, ToolStep) and event.tool == "exit":
            raise SystemExit(3)

    h = make_processor(WRITES, rules=[exits], background=True)
    _run(h, ["exit", "lookup_order"])
    _run(h, ["lookup_order"])
    assert h.processor.force_flush(10_000)
    # the rule's SystemExit is contained where rules run (counted as the rule's error): no step is
    # lost, the rest of its run and the next run are checked
    assert h.value("agenteval_processor_errors_total", stage="rule") == 1.0
    assert h.value("agenteval_processor_errors_total", stage="on_end") == 0.0
    assert [t.tool_calls for t in h.trajectories] == [2, 1]


def test_max_queue_size_is_checked() -> None:
    with pytest.raises(ValueError, match="max_queue_size"):
        TrajectoryProcessor(Policy(), registry=CollectorRegistry(), background=True, max_queue_size=0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_has_its_own_queue_and_consumer() -> None:
    done: list[Any] = []
    proc = TrajectoryProcessor(Policy.from_yaml(WRITES, "<test>"), registry=CollectorRegistry(),
                               on_trajectory=[done.append], background=True)
    provider = TracerProvider()
    provider.add_span_processor(proc)
    tracer = provider.get_tracer("app")

    def agent_run(n: int) -> None:
        root = tracer.start_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"})
        for i in range(n):
            tracer.start_span("execute_tool lookup_order", context=trace.set_span_in_context(root), attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.arguments": f'{{"n": {i}}}'}).end()
        root.end()

    agent_run(2)
    assert proc.force_flush(10_000) and [t.tool_calls for t in done] == [2]
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            inherited = len(done)
            agent_run(3)
            ok = proc.force_flush(10_000)
            code = 0 if ok and [t.tool_calls for t in done[inherited:]] == [3] else 3
        finally:
            os._exit(code)
    assert child_exit_code(pid, "the forked child's checks never ran") == 0
    agent_run(1)
    assert proc.force_flush(10_000) and [t.tool_calls for t in done] == [2, 1]
    provider.shutdown()


def test_busy_threads_are_slowed_to_the_checks_pace_not_dropped(make_processor: Any) -> None:
    """16 threads ending spans as fast as they can against a queue of 8: the consumer keeps making
    progress, so a full queue waits for room instead of dropping (before: most spans dropped)."""
    h = make_processor(WRITES, background=True, max_queue_size=8)
    runs_per_thread = 40

    def work() -> None:
        for _ in range(runs_per_thread):
            _run(h, ["lookup_order", "lookup_order"])

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert h.processor.force_flush(30_000)
    assert h.value("agenteval_spans_dropped_total", reason="queue_full") == 0.0
    assert len(h.trajectories) == 16 * runs_per_thread
    assert all(t.tool_calls == 2 for t in h.trajectories)
