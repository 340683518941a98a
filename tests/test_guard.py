"""The guard: the seed cases stopped before they run, the rest allowed; the blocked counter exact;
observe mode deciding exactly what the processor reports after the fact, call for call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import Harness
from guard_support import BLOCKED_BY, CLAIM, GUARD_POLICY, REFUND_A, SCENARIO, call
from opentelemetry import trace

from otel_agenteval import ActionBlocked, Policy, Rule
from otel_agenteval.model.trajectory import ToolStep
from otel_agenteval.model.violation import Violation
from otel_agenteval.rules import Check, Event, applies_to

Make = Callable[..., Harness]


def run_scenario(h: Harness, mode: str = "enforce") -> tuple[list[Any], list[int]]:
    """SCENARIO through the guard in one agent run: the decisions, and each call's span id."""
    guard = h.processor.guard(tracer_provider=h.provider)
    root = h.agent("support", at=0, conv="conv-1")
    decisions, spans = [], []
    for i, (tool, args, result, error) in enumerate(SCENARIO):
        decisions.append(call(h, guard, root, tool, args, at=1 + i, result=result, error=error))
    h.end(root, at=len(SCENARIO) + 2)
    for t in h.trajectories:
        spans = [s.span_id for s in t.steps]
    return decisions, spans


def test_seed_cases_are_stopped_before_they_run(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY)
    decisions, _ = run_scenario(h)

    assert [d.rule if d.blocked else None for d in decisions] == BLOCKED_BY
    assert [d.needs_confirmation for d in decisions] == [r == "write_without_confirmation" for r in BLOCKED_BY]
    # nothing unsafe ran, so after the fact there is nothing to report but the retry's warning
    assert h.rules() == ["write_retried_after_error"]
    assert decisions[-1].allowed and [w.rule for w in decisions[-1].warnings] == ["write_retried_after_error"]
    # the blocked calls are not steps; the allowed ones are, with their outcome
    assert len(h.trajectories) == 1
    t = h.trajectories[0]
    ran = [c for c, r in zip(SCENARIO, BLOCKED_BY) if r is None]
    assert [(s.tool, s.ok) for s in t.steps] == [(c[0], c[3] is None) for c in ran]
    # the message is the after-the-fact check's, word for word
    assert decisions[2].message == ("create_claim called again with identical arguments after a successful call "
                                    "in this run")
    assert decisions[10].message == "delete_account is not in the allowed tools of agent support"


def test_blocked_counter_counts_exactly_the_blocked_calls(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY)
    run_scenario(h)
    counts: dict[tuple[str, str], int] = {}
    for (tool, *_), rule in zip(SCENARIO, BLOCKED_BY):
        if rule is not None:
            counts[(rule, tool)] = counts.get((rule, tool), 0) + 1
    samples = {(s.labels["rule"], s.labels["tool"]): s.value
               for m in h.registry.collect() if m.name == "agenteval_blocked_actions"
               for s in m.samples if s.name.endswith("_total")}
    assert samples == counts
    assert all(s.labels["service_name"] == "shop" and s.labels["agent_name"] == "support"
               for m in h.registry.collect() if m.name == "agenteval_blocked_actions" for s in m.samples)
    violations = {s.labels["rule"]: s.value for m in h.registry.collect() if m.name == "agenteval_violations"
                  for s in m.samples if s.name.endswith("_total") and s.value}
    assert violations == {"write_retried_after_error": 1}  # a blocked call is not a violation


def test_blocked_call_is_recorded_on_its_tool_span(make_processor: Make) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    h = make_processor(GUARD_POLICY)
    exported = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exported))
    run_scenario(h)
    tools = [s for s in exported.get_finished_spans() if s.name.startswith("execute_tool")]
    seen = [(s.attributes.get("agenteval.guard.decision"), s.attributes.get("agenteval.guard.rule"),
             s.attributes.get("agenteval.blocked")) for s in tools]
    writes = {"create_claim", "issue_refund", "update_payment", "delete_account"}
    assert seen == [
        (None if rule is None and tool not in writes else ("allowed" if rule is None else "blocked"), rule,
         True if rule is not None else None)
        for (tool, *_), rule in zip(SCENARIO, BLOCKED_BY)
    ]


def test_observe_mode_decides_what_the_processor_reports_call_for_call(make_processor: Make) -> None:
    alone = make_processor(GUARD_POLICY)  # the processor alone: every call runs, checked after the fact
    root = alone.agent("support", at=0, conv="conv-1")
    spans = [alone.tool(root, tool, args, at=1 + i, result=res, error=err) for i, (tool, args, res, err)
             in enumerate(SCENARIO)]
    alone.end(root, at=len(SCENARIO) + 2)
    after: list[list[str]] = [[v.rule for v in alone.violations if v.span_id == format(s.context.span_id, "016x")]
                              for s in spans]

    observed = make_processor(Policy.from_yaml(GUARD_POLICY + "guard: {mode: observe}\n"))
    decisions, _ = run_scenario(observed)
    assert all(d.allowed for d in decisions)  # observe: nothing stopped
    before = [[v.rule for v in (*d.violations, *d.warnings)] for d in decisions]
    assert before == after
    assert sum(1 for rules in after if rules) >= 7  # the scenario really does break the rules
    assert [d.would_block for d in decisions] == [any(r != "write_retried_after_error" for r in rules)
                                                  for rules in after]
    # what the processor reported is the same with the guard watching
    assert [v.rule for v in observed.violations] == [v.rule for v in alone.violations]
    # and a decision's findings, built as Violations only when read, are those reports field for field
    def key(v: Violation) -> tuple[str, str]:
        return (v.span_id or "", v.rule)

    built = [v for d in decisions for v in (*d.violations, *d.warnings)]
    assert sorted(built, key=key) == sorted(observed.violations, key=key)
    would = sum(s.value for m in observed.registry.collect() if m.name == "agenteval_guard_would_block"
                for s in m.samples if s.name.endswith("_total"))
    assert would == sum(1 for d in decisions if d.would_block)
    assert observed.value("agenteval_blocked_actions_total", service_name="shop", agent_name="support",
                          rule="duplicate_write", tool="create_claim") is None


def test_observe_for_one_tool_only(make_processor: Make) -> None:
    policy = Policy.from_yaml(GUARD_POLICY + "guard: {tools: {issue_refund: {mode: observe}}}\n")
    h = make_processor(policy)
    decisions, _ = run_scenario(h)
    assert [(d.tool, d.allowed) for d in decisions if d.would_block] == [
        ("create_claim", False), ("issue_refund", True), ("issue_refund", True), ("issue_refund", True),
        ("update_payment", False), ("delete_account", False)]


def test_enforce_raises_with_the_decision_and_allowed_write_uses_its_confirmation(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY)
    guard = h.processor.guard()
    root = h.agent("support", at=0, conv="conv-2")
    h.tool(root, "ask_user_confirmation", {"tool": "issue_refund", "amount": 25}, at=1,
           result='{"confirmed": true}')
    span = h.start("execute_tool issue_refund", root, 2, {"gen_ai.operation.name": "execute_tool",
                                                         "gen_ai.tool.name": "issue_refund"})
    with trace.use_span(span, end_on_exit=False):
        assert guard.enforce("issue_refund", REFUND_A).allowed
        assert guard.check("issue_refund", REFUND_A).allowed  # asked again from the same call: still its own
        assert guard.in_flight == 1
    # a second refund checked while the first still runs: the yes is promised to the first
    other = h.start("execute_tool issue_refund", root, 2.5, {"gen_ai.operation.name": "execute_tool",
                                                            "gen_ai.tool.name": "issue_refund"})
    with trace.use_span(other, end_on_exit=False), pytest.raises(ActionBlocked) as caught:
        guard.enforce("issue_refund", {"order_id": "77001", "amount": 25})
    assert caught.value.decision.rule == "write_without_confirmation"
    assert caught.value.decision.needs_confirmation
    assert "Ask the user to confirm" in str(caught.value)
    h.end(other, 2.6)
    h.end(span, 3, {"gen_ai.tool.call.arguments": '{"order_id": "88120", "amount": 25}'})
    assert guard.in_flight == 0  # both calls are over: nothing is promised any more
    # the yes went with the refund that ran, not back to the pool: a third refund asked now has none
    assert call(h, guard, root, "issue_refund", {"order_id": "55555", "amount": 25}, at=3.5).rule == (
        "write_without_confirmation")
    h.end(root, 4)
    assert h.rules() == []  # the allowed refund used its confirmation, as the after-the-fact rule saw


def test_a_failed_write_leaves_its_confirmation_for_the_retry(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY)
    guard = h.processor.guard()
    root = h.agent("support", at=0, conv="conv-3")
    h.tool(root, "ask_user_confirmation", {"tool": "issue_refund", "amount": 25}, at=1, result='{"confirmed": true}')
    first = call(h, guard, root, "issue_refund", REFUND_A, at=2, error="gateway timeout")
    retry = call(h, guard, root, "issue_refund", REFUND_A, at=3, result="ok")
    again = call(h, guard, root, "issue_refund", REFUND_A, at=4, result="ok")
    h.end(root, 5)
    assert (first.allowed, retry.allowed, again.allowed) == (True, True, False)
    assert [w.rule for w in retry.warnings] == ["write_retried_after_error"]
    assert again.rule == "duplicate_write"


def test_second_turn_of_a_conversation_sees_the_first(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY)
    guard = h.processor.guard()
    h.run("support", [("create_claim", CLAIM)], conv="conv-4")
    root = h.agent("support", at=10, conv="conv-4")  # a new run: nothing recorded in it yet
    d = call(h, guard, root, "create_claim", CLAIM, at=11)
    h.end(root, 12)
    assert (d.allowed, d.rule) == (False, "duplicate_write")
    assert "trace " in (d.message or "")


def test_budget_already_crossed_stops_the_next_call(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY + "  analyst: {budget: {max_steps: 2, max_cost_usd: 0.001}}\n"
                       "pricing:\n  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10}\n")
    guard = h.processor.guard()
    root = h.agent("analyst", at=0)
    assert call(h, guard, root, "lookup_order", {"order_id": "1"}, at=1).allowed
    assert call(h, guard, root, "lookup_order", {"order_id": "2"}, at=2).allowed
    third = call(h, guard, root, "lookup_order", {"order_id": "3"}, at=3)
    assert (third.allowed, third.rule, third.message) == (False, "budget_breach", "steps budget exceeded: 3 > 2")
    other = h.agent("analyst", at=10)
    h.chat(other, at=11, inp=1000, out=0)  # $0.0025: over the cost budget
    d = call(h, guard, other, "lookup_order", {"order_id": "4"}, at=12)
    assert (d.allowed, d.message) == (False, "cost budget exceeded: 0.0025 > 0.001")
    h.end(root, 4)
    h.end(other, 13)


def test_custom_rule_that_declares_itself_guard_capable(make_processor: Make) -> None:
    @applies_to((ToolStep,), guard=True)
    def no_big_refunds(event: Event, check: Check) -> list[Violation] | None:
        if isinstance(event, ToolStep) and event.tool == "issue_refund" and event.arguments.get("amount", 0) > 100:
            return [check.violation("big_refund", "critical", "refunds over 100 need a human", event)]
        return None

    @applies_to((ToolStep,))
    def after_the_fact_only(event: Event, check: Check) -> list[Violation] | None:
        return [check.violation("noted", "info", "seen", event)] if isinstance(event, ToolStep) else None

    rules: list[Rule] = [no_big_refunds, after_the_fact_only]
    h = make_processor("tools: {issue_refund: {write: true}}", rules=rules)
    guard = h.processor.guard()
    root = h.agent("support", at=0)
    big = call(h, guard, root, "issue_refund", {"order_id": "1", "amount": 500}, at=1)
    small = call(h, guard, root, "issue_refund", {"order_id": "2", "amount": 5}, at=2)
    h.end(root, 3)
    assert (big.allowed, big.rule, small.allowed) == (False, "big_refund", True)


def test_guard_errors_fail_closed_for_writes_and_open_for_reads(make_processor: Make) -> None:
    @applies_to((ToolStep,), guard=True)
    def broken(event: Event, check: Check) -> list[Violation] | None:
        raise RuntimeError("bug in a rule")

    h = make_processor("tools: {issue_refund: {write: true}}", rules=[broken])
    guard = h.processor.guard()
    root = h.agent("support", at=0)
    write = call(h, guard, root, "issue_refund", {"amount": 1}, at=1)
    read = call(h, guard, root, "lookup_order", {}, at=2)
    h.end(root, 3)
    assert (write.allowed, write.error, write.rule) == (False, True, "guard_error")
    assert (read.allowed, read.error) == (True, True)
    assert h.value("agenteval_guard_errors_total", fail="closed") == 1
    assert h.value("agenteval_guard_errors_total", fail="open") == 1
    opened = make_processor("tools: {issue_refund: {write: true}}\nguard: {on_error: open}", rules=[broken])
    root = opened.agent("support", at=0)
    assert call(opened, opened.processor.guard(), root, "issue_refund", {"amount": 1}, at=1).allowed


def test_no_span_open_gets_a_guard_span_of_its_own(make_processor: Make) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    h = make_processor(GUARD_POLICY)
    exported = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exported))
    guard = h.processor.guard(tracer_provider=h.provider)
    d = guard.check("issue_refund", REFUND_A)  # no span at all: nothing confirmed anything
    assert (d.allowed, d.rule) == (False, "write_without_confirmation")
    spans = exported.get_finished_spans()
    assert [(s.name, s.attributes.get("agenteval.blocked"), s.attributes.get("agenteval.guard.rule"))
            for s in spans] == [("agenteval.guard", True, "write_without_confirmation")]
    assert h.value("agenteval_blocked_actions_total", service_name="unknown", agent_name="unknown",
                   rule="write_without_confirmation", tool="issue_refund") == 1
    # the guard's own span is its record, not agent work the processor failed to read
    assert h.value("agenteval_unread_spans_total", scope="otel_agenteval.guard") is None


def test_asking_changes_nothing_the_processor_keeps(make_processor: Make) -> None:
    """The rules asked in preview leave the run as they found it: no budget marked fired, no
    repeat counted, no confirmation used (only a promise, which a blocked call never gets)."""
    h = make_processor(GUARD_POLICY + "  analyst: {budget: {max_steps: 1, max_repeats: 1}}\n")
    guard = h.processor.guard()
    root = h.agent("analyst", at=0, conv="conv-9")
    h.tool(root, "ask_user_confirmation", {"tool": "issue_refund", "amount": 25}, at=1, result='{"confirmed": true}')
    h.tool(root, "lookup_order", {"order_id": "1"}, at=2)
    run = h.processor.engine._routes[root.context.span_id]
    t = run.traj
    assert t is not None
    before = (set(t.budgets_fired), dict(t.extra.get("repeats", {})), [c.used for c in t.extra["confirmations"]])
    with trace.use_span(root, end_on_exit=False):
        for _ in range(3):
            assert guard.peek("lookup_order", {"order_id": "1"}).rule == "budget_breach"
            assert guard.check("lookup_order", {"order_id": "1"}).rule == "budget_breach"
            assert guard.check("issue_refund", REFUND_A).rule == "budget_breach"
    assert (set(t.budgets_fired), dict(t.extra.get("repeats", {})),
            [c.used for c in t.extra["confirmations"]]) == before
    assert [c.held for c in t.extra["confirmations"]] == [None]
    h.end(root, 3)


def test_a_stopped_call_builds_its_violation_only_when_read(make_processor: Make,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    build = Check.build

    def counted(self: Check, rule: str, *args: Any) -> Violation:
        built.append(rule)
        return build(self, rule, *args)

    monkeypatch.setattr(Check, "build", counted)
    h = make_processor(GUARD_POLICY)
    guard = h.processor.guard(tracer_provider=h.provider)
    d = guard.check("issue_refund", REFUND_A)
    assert (d.rule, d.severity, built) == ("write_without_confirmation", "critical", [])  # decided, counted, recorded
    [v] = d.violations
    assert (v.rule, v.tool, v.message, built) == ("write_without_confirmation", "issue_refund", d.message,
                                                  ["write_without_confirmation"])
    assert d.violations == (v,) and built == ["write_without_confirmation"]  # built once


def test_a_decision_is_a_value(make_processor: Make) -> None:
    """Decision is a plain compiled class, not a dataclass: still compared, hashed, printed, copied
    and pickled field by field, and (compiled) refusing assignment."""
    import copy
    import pickle

    from otel_agenteval.cli.build import build_name
    from otel_agenteval.guard.decision import Decision

    h = make_processor(GUARD_POLICY)
    decisions, _ = run_scenario(h)
    stopped = decisions[2]
    assert stopped.rule == "duplicate_write" and stopped.would_block and not stopped.allowed
    assert copy.copy(stopped) == stopped and hash(copy.copy(stopped)) == hash(stopped)
    assert stopped != decisions[0] and decisions[0] == Decision(decisions[0].tool, True)
    plain = Decision("issue_refund", False, True, rule="write_without_confirmation", severity="critical",
                     message="no yes", needs_confirmation=True)
    assert pickle.loads(pickle.dumps(plain)) == plain
    assert repr(plain) == ("Decision(tool='issue_refund', allowed=False, would_block=True, mode='enforce', "
                           "rule='write_without_confirmation', severity='critical', message='no yes', "
                           "needs_confirmation=True, found=(), warned=(), error=False)")
    if build_name() == "compiled (mypyc)":
        with pytest.raises(AttributeError):
            plain.allowed = True  # type: ignore[misc]
