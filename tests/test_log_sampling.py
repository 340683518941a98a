"""A loop of stopped calls or repeated violations writes a few log lines, not one per call: the
first 10 of a kind in 10 s, then one in 100, each written line saying how many it follows, the
rest counted in ``agenteval_log_lines_dropped_total{event}`` (as the Collector samples its log)."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from trace_files import otlp_json_lines

from otel_agenteval import Policy, PolicyError, TrajectoryProcessor
from otel_agenteval.cli.main import main
from otel_agenteval.model import product_log
from otel_agenteval.model.product_log import FIRST, MAX_KINDS, THEREAFTER, TICK_NS, LineSampling

POLICY = "tools: {create_claim: {write: true}, issue_refund: {write: true}}\n"


class Clock:
    def __init__(self) -> None:
        self.now = 100 * 10**9

    def __call__(self) -> int:
        return self.now


def test_the_first_of_a_kind_are_written_then_one_in_a_hundred() -> None:
    dropped: dict[str, int] = {}
    clock = Clock()
    lines = LineSampling(dropped, clock)
    said = [lines.admit("agenteval.blocked", "duplicate_write", "shop", "support", "create_claim") for _ in range(510)]
    written = [(n + 1, d) for n, d in enumerate(said) if d is not None]
    assert written == [(n, 0) for n in range(1, FIRST + 1)] + [(FIRST + k * THEREAFTER, THEREAFTER - 1)
                                                               for k in range(1, 6)]
    assert dropped == {"agenteval.blocked": 510 - len(written)}
    # another kind (another tool) has its own count; the first kind's next window tells what it left out
    assert lines.admit("agenteval.blocked", "duplicate_write", "shop", "support", "issue_refund") == 0
    clock.now += TICK_NS
    assert lines.admit("agenteval.blocked", "duplicate_write", "shop", "support", "create_claim") == 510 - 10 - 5 * 100
    assert [lines.admit("agenteval.blocked", "duplicate_write", "shop", "support", "create_claim")
            for _ in range(FIRST - 1)] == [0] * (FIRST - 1)


def test_kinds_are_bounded_and_every_line_left_out_is_counted() -> None:
    dropped: dict[str, int] = {}
    clock = Clock()
    lines = LineSampling(dropped, clock)
    said = [lines.admit("agenteval.violation", "scope_violation", "shop", "support", f"tool-{n}")
            for n in range(5 * MAX_KINDS)]
    assert len(lines._kinds) == MAX_KINDS + 1  # the bound, and the one kind the rest share
    written = sum(d is not None for d in said)
    assert written == MAX_KINDS + FIRST + (4 * MAX_KINDS - FIRST) // THEREAFTER
    assert dropped["agenteval.violation"] == 5 * MAX_KINDS - written
    # a window later, kinds with nothing untold are forgotten, so new ones are told apart again
    clock.now += TICK_NS
    assert lines.admit("agenteval.violation", "scope_violation", "shop", "support", "new-tool") == 0
    assert len(lines._kinds) <= 2


def _stderr_lines(err: str, event: str) -> list[str]:
    return [line for line in err.splitlines() if f"{event}:" in line]


def _dropped(registry: CollectorRegistry, event: str) -> float | None:
    return registry.get_sample_value("agenteval_log_lines_dropped_total", {"event": event})


def _writes(tracer: Any, calls: dict[str, int]) -> None:
    """One agent run calling each tool that many times with the same arguments."""
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        for tool, n in calls.items():
            for _ in range(n):
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": '{"order_id": "88120"}'}):
                    pass


def _stop_a_call(policy: str, calls: int, capsys: Any) -> tuple[list[str], CollectorRegistry]:
    """A guarded agent makes one claim, then the same claim ``calls`` times, each stopped: the
    lines written and the registry."""
    structlog.reset_defaults()  # as an app that configured nothing: the lines go to stderr
    registry = CollectorRegistry()
    processor = TrajectoryProcessor(Policy.from_yaml(policy, "<test>"), registry=registry,
                                    clock=lambda: 0)  # one window, however slow the machine
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer, guard = provider.get_tracer("app"), processor.guard(tracer_provider=provider)
    claim = {"order_id": "88120", "reason": "damaged"}
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        with tracer.start_as_current_span("execute_tool create_claim", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                "gen_ai.tool.call.arguments": json.dumps(claim)}):
            assert guard.check("create_claim", claim).allowed
        stopped = [guard.check("create_claim", claim).allowed for _ in range(calls)]
    provider.shutdown()
    assert not any(stopped)
    return _stderr_lines(capsys.readouterr().err, "agenteval.blocked"), registry


def test_a_loop_of_stopped_calls_writes_a_few_lines_and_counts_every_call(capsys: Any) -> None:
    calls = 500
    written, registry = _stop_a_call(POLICY, calls, capsys)
    assert len(written) == FIRST + (calls - FIRST) // THEREAFTER == 14
    assert not any("lines_dropped" in line for line in written[:FIRST])
    assert all("lines_dropped=99" in line for line in written[FIRST:])
    assert _dropped(registry, "agenteval.blocked") == calls - len(written)
    assert _dropped(registry, "agenteval.would_block") == 0  # each event's series from the start
    # every stopped call is still counted where alerts look
    assert [(s.labels["rule"], s.labels["tool"], s.value) for m in registry.collect()
            if m.name == "agenteval_blocked_actions" for s in m.samples
            if s.name.endswith("_total")] == [("duplicate_write", "create_claim", calls)]


@pytest.mark.parametrize(("sampling", "written"), [
    ("{enabled: false}", 500),  # an audit log: every line
    ("{initial: 3, thereafter: 50}", 3 + (500 - 3) // 50),
    ("{initial: 2, thereafter: 0}", 2),  # none past the first till the next tick, as the Collector's
])
def test_the_policy_sets_the_schedule_or_turns_it_off(sampling: str, written: int, capsys: Any) -> None:
    lines, registry = _stop_a_call(POLICY + f"outputs: {{log_sampling: {sampling}}}\n", 500, capsys)
    assert len(lines) == written
    assert _dropped(registry, "agenteval.blocked") == 500 - written


def test_the_tick_starts_a_kind_afresh() -> None:
    dropped: dict[str, int] = {}
    clock = Clock()
    lines = LineSampling(dropped, clock, first=1, thereafter=0, tick_ns=5)
    assert [lines.admit("agenteval.violation", "budget_breach") for _ in range(4)] == [0, None, None, None]
    clock.now += 4
    assert lines.admit("agenteval.violation", "budget_breach") is None
    clock.now += 1  # the tick is over: written, telling the four left out
    assert lines.admit("agenteval.violation", "budget_breach") == 4
    assert dropped == {"agenteval.violation": 4}


@pytest.mark.parametrize(("setting", "error"), [
    ("{thereafter: -1}", "outputs.log_sampling.thereafter: must be >= 0"),
    ("{tick_s: 0}", "outputs.log_sampling.tick_s: must be > 0"),
    ("{initial: many}", "outputs.log_sampling.initial: Input should be a valid integer"),
    ("{every: 1}", "outputs.log_sampling.every"),
])
def test_a_bad_sampling_setting_is_named(setting: str, error: str) -> None:
    with pytest.raises(PolicyError, match=error):
        Policy.from_yaml(f"outputs: {{log_sampling: {setting}}}\n", "<test>")


def test_repeated_violations_are_sampled_by_kind(capsys: Any) -> None:
    structlog.reset_defaults()
    registry = CollectorRegistry()
    processor = TrajectoryProcessor(Policy.from_yaml(POLICY, "<test>"), registry=registry,
                                    clock=lambda: 0)  # one window, however slow the machine
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    writes = 300  # the same claim again and again: 299 duplicate writes; another tool's duplicate, another kind
    _writes(tracer, {"create_claim": writes, "issue_refund": 2})
    provider.shutdown()
    lines = _stderr_lines(capsys.readouterr().err, "agenteval.violation")
    duplicates = [line for line in lines if "tool=create_claim" in line]
    assert len(duplicates) == FIRST + (writes - 1 - FIRST) // THEREAFTER == 12
    assert ["tool=issue_refund" in line for line in lines].count(True) == 1
    violations = sum(s.value for m in registry.collect() if m.name == "agenteval_violations"
                     for s in m.samples if s.name.endswith("_total") and s.labels["rule"] == "duplicate_write")
    assert violations == (writes - 1) + 1  # counted, all of them: 299 claims and the refund
    assert _dropped(registry, "agenteval.violation") == writes - 1 - len(duplicates)


def test_replay_verbose_logs_every_violation(tmp_path: Any, capsys: Any) -> None:
    """A recording is read at its own pace: ``replay -v`` asked for each violation, and gets each."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _writes(provider.get_tracer("app"), {"create_claim": 60})
    provider.shutdown()
    trace_file = otlp_json_lines(exporter.get_finished_spans(), tmp_path / "run.jsonl")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    code = main(["replay", str(trace_file), "--policy", str(policy), "-v"])
    err = capsys.readouterr().err
    assert code == 1  # violations found
    assert len(_stderr_lines(err, "agenteval.violation")) == 59 and "lines_dropped" not in err


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_child_forked_while_a_line_was_being_sampled_can_log() -> None:
    """The sampling lock is made new in a forked child (a thread of the parent may have held it)."""
    product_log._LOCK.acquire()  # as another thread of the parent, mid-sample, at the fork
    try:
        pid = os.fork()
        if pid == 0:  # the child: one admit must not wait on the parent's lock
            signal.alarm(10)  # killed, not hung, if it does
            code = 0 if LineSampling({}).admit("agenteval.blocked", "r") == 0 else 1
            os._exit(code)
    finally:
        product_log._LOCK.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

