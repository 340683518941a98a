"""``budget_breach``: steps, LLM calls, tokens, cost and duration, once per budget per run."""

from __future__ import annotations

from ..model.trajectory import LLMCall, ToolStep
from ..model.violation import Violation
from .check import ALL_EVENTS, Check, Event, Finish, applies_to


def _breach(check: Check, out: list[Violation], fired: set[str], budget: str, used: float, limit: float,
            step: ToolStep | LLMCall | None) -> None:
    if budget in fired:
        return
    fired.add(budget)
    out.append(check.violation("budget_breach", "warning", f"{budget} budget exceeded: {used:g} > {limit:g}", step,
                               budget=budget, used=used, limit=limit))


@applies_to(ALL_EVENTS, lambda p: None if any(a.budget != type(a.budget)() for a in p.agents.values()) else frozenset(),
            over_budget=True, guard=True)
def budget_breach(event: Event, check: Check) -> list[Violation] | None:
    """Fires at the event that crosses a budget. Counts include ``event`` itself.

    Asked by the guard (``check.preview``), it says whether the call would be over a budget,
    whether or not that was reported before, and counts nothing."""
    b = check.budget
    if not check.has_budget:
        return None
    t = check.trajectory
    out: list[Violation] = []
    preview = check.preview is not None
    fired = set() if preview else t.budgets_fired

    if isinstance(event, ToolStep):
        if b.max_steps is not None and t.tool_calls + 1 > b.max_steps:
            _breach(check, out, fired, "steps", t.tool_calls + 1, b.max_steps, event)
        if b.max_repeats is not None:  # loop guard: the same call over and over
            key = event.call_key
            if preview:
                n = t.extra.get("repeats", {}).get(key, 0) + 1
            else:
                seen: dict[tuple[str, str], int] = t.extra.setdefault("repeats", {})
                if key in seen or len(seen) < check.policy.limits.max_steps_per_trajectory:
                    n = seen[key] = seen.get(key, 0) + 1
                else:  # bounded like the run's steps: a call past it is not counted for repeats
                    t.state_dropped += 1
                    n = 1
            if n > b.max_repeats:
                _breach(check, out, fired, "repeats", n, b.max_repeats, event)
        # already over by earlier model calls (reported then; the guard stops the calls after)
        if b.max_tokens is not None and t.input_tokens + t.output_tokens > b.max_tokens:
            _breach(check, out, fired, "tokens", t.input_tokens + t.output_tokens, b.max_tokens, event)
        if b.max_cost_usd is not None and t.cost_usd > b.max_cost_usd:
            _breach(check, out, fired, "cost", round(t.cost_usd, 6), b.max_cost_usd, event)
        end_ns = event.end_ns
    elif isinstance(event, LLMCall):
        if b.max_llm_calls is not None and t.llm_calls + 1 > b.max_llm_calls:
            _breach(check, out, fired, "llm_calls", t.llm_calls + 1, b.max_llm_calls, event)
        tokens = t.input_tokens + t.output_tokens + event.input_tokens + event.output_tokens
        if b.max_tokens is not None and tokens > b.max_tokens:
            _breach(check, out, fired, "tokens", tokens, b.max_tokens, event)
        if b.max_cost_usd is not None:
            cost = t.cost_usd + event.cost_usd
            if cost > b.max_cost_usd:
                _breach(check, out, fired, "cost", round(cost, 6), b.max_cost_usd, event)
        end_ns = event.end_ns
    else:
        assert isinstance(event, Finish)
        end_ns = event.end_ns
        if b.max_tokens is not None and t.llm_calls == 0 and t.root is not None:
            tokens = t.input_tokens + t.output_tokens
            if tokens > b.max_tokens:
                _breach(check, out, fired, "tokens", tokens, b.max_tokens, None)
        if b.max_cost_usd is not None and t.cost_usd > b.max_cost_usd:
            _breach(check, out, fired, "cost", round(t.cost_usd, 6), b.max_cost_usd, None)
    if b.max_duration_s is not None:
        elapsed = max(0, end_ns - t.started_ns) / 1e9
        if elapsed > b.max_duration_s:
            step = event if not isinstance(event, Finish) else None
            _breach(check, out, fired, "duration", round(elapsed, 3), b.max_duration_s, step)
    return out or None
