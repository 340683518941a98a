"""32 conversations guarded at once, from threads and from asyncio tasks: every decision exact,
including two identical writes (or two refunds on one yes) racing inside one run."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from typing import Any

from conftest import Harness
from guard_support import CLAIM, GUARD_POLICY, call
from opentelemetry import trace
from opentelemetry.sdk.trace import Span

from otel_agenteval import Guard
from otel_agenteval.model.trajectory import ToolStep
from otel_agenteval.model.violation import Violation
from otel_agenteval.rules import Check, Event, applies_to, builtin_rules

Make = Callable[..., Harness]
N = 32

# each conversation: (tool, arguments, result) in order, and whether the guard lets it run
def conversation(i: int) -> list[tuple[str, dict[str, Any], str | None, bool]]:
    claim = {"order_id": f"o-{i}", "reason": "damaged"}
    return [
        ("lookup_order", {"order_id": f"o-{i}"}, "{}", True),
        ("create_claim", claim, "{}", True),
        ("create_claim", claim, "{}", False),
        ("issue_refund", {"order_id": f"o-{i}", "amount": i}, "ok", False),
        ("ask_user_confirmation", {"tool": "issue_refund", "amount": i}, '{"confirmed": true}', True),
        ("issue_refund", {"order_id": f"o-{i}", "amount": i + 1}, "ok", False),
        ("issue_refund", {"order_id": f"o-{i}", "amount": i}, "ok", True),
        ("issue_refund", {"order_id": f"x-{i}", "amount": i}, "ok", False),
    ]


def tool_span(h: Harness, root: Span, tool: str, at: float) -> Span:
    return h.start(f"execute_tool {tool}", root, at, {"gen_ai.operation.name": "execute_tool",
                                                     "gen_ai.tool.name": tool})


def race(h: Harness, guard: Guard, root: Span, tool: str, args: dict[str, Any], at: float,
         barrier: threading.Barrier, out: list[bool]) -> None:
    span = tool_span(h, root, tool, at)
    with trace.use_span(span, end_on_exit=False):
        barrier.wait(timeout=10)
        d = guard.check(tool, args)
    barrier.wait(timeout=10)  # both decided while both calls are still running
    out.append(d.allowed)
    h.end(span, at + 0.5, {"gen_ai.tool.call.arguments": str(args)})


def test_threads(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY)
    guard = h.processor.guard()
    results: dict[int, list[bool]] = {}
    raced: dict[int, list[bool]] = {}
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            root = h.agent("support", at=0, conv=f"conv-{i}")
            steps = conversation(i)
            results[i] = [call(h, guard, root, tool, args, at=1 + k, result=res).allowed
                          for k, (tool, args, res, _) in enumerate(steps)]
            # two identical new writes at once in one run, from two threads: exactly one runs
            barrier = threading.Barrier(2)
            out: list[bool] = []
            twins = [threading.Thread(target=race, args=(h, guard, root, "create_claim",
                                                         {"order_id": f"n-{i}", "reason": "x"}, 20, barrier, out))
                     for _ in range(2)]
            for t in twins:
                t.start()
            for t in twins:
                t.join()
            raced[i] = sorted(out)
            h.end(root, 30)
        except BaseException as exc:  # noqa: BLE001 - surfaced below, with the conversation
            errors.append(exc)

    workers = [threading.Thread(target=one, args=(i,)) for i in range(N)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert results == {i: [ok for *_, ok in conversation(i)] for i in range(N)}
    assert raced == {i: [False, True] for i in range(N)}
    blocked = sum(s.value for m in h.registry.collect() if m.name == "agenteval_blocked_actions"
                  for s in m.samples if s.name.endswith("_total"))
    assert blocked == N * (sum(1 for *_, ok in conversation(0) if not ok) + 1)
    assert [v.rule for v in h.violations] == []
    assert guard.in_flight == 0


def test_asyncio(make_processor: Make) -> None:
    h = make_processor(GUARD_POLICY)
    guard = h.processor.guard()

    async def two_refunds_on_one_yes(root: Span, i: int) -> list[bool]:
        """Two refunds of the same amount at once, one confirmation: the yes goes to one of them."""
        async def refund(order: str, at: float) -> bool:
            span = tool_span(h, root, "issue_refund", at)
            with trace.use_span(span, end_on_exit=False):
                await asyncio.sleep(0)
                d = guard.check("issue_refund", {"order_id": order, "amount": 1000 + i})
            await asyncio.sleep(0.001)  # the refund runs while the other is checked
            h.end(span, at + 0.5, {"gen_ai.tool.call.arguments": f'{{"order_id": "{order}", "amount": {1000 + i}}}'})
            return d.allowed

        h.tool(root, "ask_user_confirmation", {"tool": "issue_refund", "amount": 1000 + i}, at=20,
               result='{"confirmed": true}')
        return sorted(await asyncio.gather(refund(f"p-{i}", 21), refund(f"q-{i}", 21)))

    async def one(i: int) -> tuple[list[bool], list[bool]]:
        root = h.agent("support", at=0, conv=f"conv-{i}")
        got = []
        for k, (tool, args, res, _) in enumerate(conversation(i)):
            await asyncio.sleep(0)  # the other conversations go on in between
            got.append(call(h, guard, root, tool, args, at=1 + k, result=res).allowed)
        raced = await two_refunds_on_one_yes(root, i)
        h.end(root, 30)
        return got, raced

    async def main() -> list[tuple[list[bool], list[bool]]]:
        return await asyncio.gather(*(one(i) for i in range(N)))

    done = asyncio.run(main())
    assert [d[0] for d in done] == [[ok for *_, ok in conversation(i)] for i in range(N)]
    assert [d[1] for d in done] == [[False, True]] * N
    assert [v.rule for v in h.violations] == []


def test_two_identical_writes_checked_inside_one_slow_rule_at_once_only_one_runs(make_processor: Make) -> None:
    """A guard-capable rule that takes its time (it asks a fraud service): two identical claims of one
    run are both inside it at once, so each was checked before the other was promised. The promise
    taken after the rules is what stops the second: exactly one of them runs, every time."""
    both_inside = threading.Barrier(2)
    waited: set[int] = set()

    @applies_to((ToolStep,), guard=True)
    def asks_a_fraud_service(event: Event, check: Check) -> list[Violation] | None:
        if check.preview is not None and threading.get_ident() not in waited:  # the first look of each thread
            waited.add(threading.get_ident())
            both_inside.wait(timeout=10)
        return None

    h = make_processor(GUARD_POLICY, rules=[*builtin_rules().values(), asks_a_fraud_service])
    guard = h.processor.guard()
    root = h.agent("support", at=0, conv="conv-slow")
    barrier = threading.Barrier(2)
    out: list[bool] = []
    twins = [threading.Thread(target=race, args=(h, guard, root, "create_claim", CLAIM, 1, barrier, out))
             for _ in range(2)]
    for t in twins:
        t.start()
    for t in twins:
        t.join()
    h.end(root, 3)
    assert sorted(out) == [False, True]
    assert h.value("agenteval_blocked_actions_total", service_name="shop", agent_name="support",
                   rule="duplicate_write", tool="create_claim") == 1
    assert [v.rule for v in h.violations] == []  # the stopped twin never ran: no duplicate after the fact


def test_threads_with_a_tiny_switch_interval(make_processor: Make) -> None:
    """test_threads with a thread switch every microsecond: the interleavings inside ``check`` that
    the default interval (5 ms) almost never makes."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        test_threads(make_processor)
    finally:
        sys.setswitchinterval(before)


def test_a_refund_checked_while_another_runs_to_the_end_on_the_same_yes_is_stopped(make_processor: Make) -> None:
    """One yes, two refunds: the second is inside a slow rule (having seen the yes unused) while the
    first is checked, runs and ends, using the yes up. The second must not take the used yes."""
    second_inside, first_done = threading.Event(), threading.Event()

    @applies_to((ToolStep,), guard=True)
    def asks_a_fraud_service(event: Event, check: Check) -> list[Violation] | None:
        if check.preview is not None and threading.current_thread().name == "second" and not first_done.is_set():
            second_inside.set()
            first_done.wait(timeout=10)
        return None

    h = make_processor(GUARD_POLICY, rules=[*builtin_rules().values(), asks_a_fraud_service])
    guard = h.processor.guard()
    root = h.agent("support", at=0, conv="conv-yes")
    h.tool(root, "ask_user_confirmation", {"tool": "issue_refund", "amount": 25}, at=1, result='{"confirmed": true}')
    out: dict[str, bool] = {}

    def first() -> None:
        second_inside.wait(timeout=10)
        out["first"] = call(h, guard, root, "issue_refund", {"order_id": "88120", "amount": 25}, at=2,
                            result="ok").allowed
        first_done.set()

    def second() -> None:
        out["second"] = call(h, guard, root, "issue_refund", {"order_id": "77001", "amount": 25}, at=2,
                             result="ok").allowed

    threads = [threading.Thread(target=first, name="first"), threading.Thread(target=second, name="second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.end(root, 4)
    assert out == {"first": True, "second": False}
    assert [v.rule for v in h.violations] == []  # the refund that ran had its yes; the other never ran
