"""A run at its end: last checks, outcome, steps in start order, what carries into the conversation.

Called once per trajectory, by the thread applying its run's events, with no lock held. The
conversation keeps what later turns need (writes, unused confirmations, grounding texts),
bounded, and the finished trajectory holds no span.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Final

from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..reading import confirmations, extract
from ..rules import Check, Finish, taint_flow
from .assemble import Assembler, keep_first
from .dispatch import Dispatch

MAX_CONVERSATION_WRITES: Final = 4096  # write calls a conversation remembers, each map
_SPAN_HOLDERS: Final = ("dialogue", "confirmed", "repeats", "taint_trusted")  # rule state that may hold spans
_start_ns = attrgetter("start_ns")


def outcome_of(t: Trajectory, reason: str) -> Any:
    """``agenteval.outcome`` on the root wins; then ``success_when``; then the root's status."""
    if reason != "root_end":
        return "incomplete"
    r = t.root
    if r is not None and r.outcome in ("success", "failure"):
        return r.outcome
    if t.succeeded:
        return "success"
    if r is not None and not r.ok:
        return "failure"
    return "unknown"


def finish(t: Trajectory, reason: str, end_ns: int, check: Check | None, dispatch: Dispatch, assembler: Assembler,
           needs_content: bool, out: list[Violation]) -> None:
    """Finalise ``t`` (its Finish rules' findings go to ``out``)."""
    if end_ns > t.last_seen_ns:
        t.last_seen_ns = end_ns
    r = t.root
    if t.llm_calls == 0 and r is not None and (r.input_tokens or r.output_tokens):
        t.input_tokens, t.output_tokens = r.input_tokens, r.output_tokens  # agent totals: no LLM span seen
        price = assembler.price(r.model)
        t.cost_usd = r.input_tokens * price[0] + r.output_tokens * price[1]
    lim = t.limits
    rules = dispatch.finish_rules
    gate = ((t.llm_calls == 0 and t.input_tokens + t.output_tokens > lim.max_tokens) or t.cost_usd > lim.max_cost_usd
            or end_ns - t.started_ns > lim.max_duration_ns)
    if rules or gate:
        event = Finish(end_ns=end_ns, reason=reason)
        view = check if check is not None else dispatch.check_of(t)
        if rules:
            dispatch.run(event, view, out, rules)
        if gate:
            dispatch.run(event, view, out, dispatch.gated_finish)
    t.outcome = outcome_of(t, reason)
    if dispatch.taint:  # before the steps are put in start order: its cursor counts them as they came
        taint_flow.carry_over(t, dispatch.policy)
    _in_start_order(t)
    if t.conversation is not None:
        _carry_over(t, needs_content)
    t.finished = True
    t.forget_chats()
    extra = t.extra
    for key in _SPAN_HOLDERS:
        if key in extra:
            del extra[key]  # drop span references: a finished trajectory holds no spans


def _in_start_order(t: Trajectory) -> None:
    steps = t.steps
    last = -1
    for s in steps:
        if s.start_ns < last:  # spans end out of start order now and then
            steps.sort(key=_start_ns)
            for i, step in enumerate(steps):
                step.index = i
            return
        last = s.start_ns


def _carry_over(t: Trajectory, needs_content: bool) -> None:
    conv = t.conversation
    assert conv is not None
    for k, v in t.writes_ok.items():
        if not keep_first(conv.writes_ok, k, v, MAX_CONVERSATION_WRITES):
            t.state_dropped += 1
    for k, v in t.writes_failed.items():
        if not keep_first(conv.writes_failed, k, v, MAX_CONVERSATION_WRITES):
            t.state_dropped += 1
    if t.last_seen_ns > conv.last_seen_ns:
        conv.last_seen_ns = t.last_seen_ns
    for conf in t.extra.get("confirmations", ()):
        if not conf.used:  # a yes given in this turn may authorise a write in the next
            confirmations.keep(conv.extra, conf)
    if needs_content:
        texts = conv.extra.setdefault("grounding_texts", [])
        texts.extend(x for s in t.steps if (x := extract.result_text(s.raw_result)))
        del texts[:-32]
