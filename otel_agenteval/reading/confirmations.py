"""Confirmations as facts: where they come from, where they are kept, and what they cover.

Sources: a confirmation tool's affirmative result (``policy.confirmation.tools``), an
``agenteval.confirmation`` span or span event (see :func:`otel_agenteval.record_confirmation`),
and the captured dialogue (read at the write, see :func:`message_confirmation` and
:mod:`.dialogue`). A confirmation authorises one write: the rule that relies on it marks it
used; a yes in the dialogue authorises each distinct action its proposal showed, once.
:func:`why_not` gives a finding's reason fields; :func:`confirmation_showed` tells another rule
whether the yes covering a write showed a given value.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from ..model.patterns import PolicyPattern, compile_pattern
from ..model.trajectory import ToolStep, Trajectory, parse_arguments
from ..policy.policy import Policy, ToolPolicy
from . import semconv as sc
from .content import is_affirmative
from .dialogue.at_write import reading_at, reasons
from .dialogue.values import shows
from .span_values import result_text

MAX_KEPT = 64  # confirmations kept per run or conversation; the oldest go first


class Hold:
    """A confirmation promised by the guard to one call that is running (see :mod:`.guard`).

    ``bound``: the guard ran inside the call's own tool span, so only the step of that span
    (``span_id``) may use it; else any step of the same call (``call_key``)."""

    __slots__ = ("bound", "call_key", "span_id")

    def __init__(self, span_id: int, call_key: tuple[str, str], bound: bool) -> None:
        self.span_id = span_id
        self.call_key = call_key
        self.bound = bound

    def admits(self, step: ToolStep) -> bool:
        return step.span_id == self.span_id if self.bound else step.call_key == self.call_key


@dataclass(slots=True)
class Confirmation:
    time_ns: int
    tool: str | None
    args: dict[str, Any]
    source: str  # tool | span | event | messages
    used: bool = False
    key: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    held: Hold | None = None  # promised by the guard to a running call: no other call may use it


def record_confirmation(tool: str | None = None, arguments: dict[str, Any] | None = None,
                        tracer: trace.Tracer | None = None, *, at_ns: int | None = None) -> None:
    """Record, from the app, that the user confirmed ``tool`` with ``arguments``.

    Emits a zero-length child span ``agenteval.confirmation`` of the current span, so the
    processor (in-process or collector-side) sees the confirmation the moment it is made.
    ``at_ns``: when the user said yes, if that was earlier (an approval given between two runs,
    recorded when the approved call starts: its start time).
    """
    t = tracer or trace.get_tracer("otel_agenteval")
    attrs: dict[str, Any] = {sc.AE_CONFIRMATION_ARGUMENTS: json.dumps(arguments or {}, default=str)}
    if tool:
        attrs[sc.AE_CONFIRMATION_TOOL] = tool
    t.start_span(sc.AE_CONFIRMATION_SPAN, attributes=attrs, start_time=at_ns).end(end_time=at_ns)


def _from_attributes(attrs: Any, time_ns: int, source: str) -> Confirmation:
    tool = attrs.get(sc.AE_CONFIRMATION_TOOL)
    return Confirmation(time_ns=time_ns, tool=str(tool) if tool else None,
                        args=parse_arguments(attrs.get(sc.AE_CONFIRMATION_ARGUMENTS)), source=source)


def from_span(span: Any) -> Confirmation:
    return _from_attributes(span.attributes or {}, span.end_time or 0, "span")


def from_events(span: Any) -> list[Confirmation]:
    return [_from_attributes(e.attributes or {}, e.timestamp or span.end_time or 0, "event")
            for e in span.events or () if e.name == sc.AE_CONFIRMATION_SPAN]


def from_tool_step(step: ToolStep, policy: Policy) -> Confirmation | None:
    """A confirmation tool's result, if it is affirmative: ``{"confirmed": true}`` or a yes."""
    if not step.ok:
        return None
    text = result_text(step.raw_result)
    if text is None:
        return None
    yes = None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and "confirmed" in data:
        yes = data["confirmed"] is True or str(data["confirmed"]).lower() in ("true", "yes")
    elif isinstance(data, bool):
        yes = data
    if yes is None:
        pats = _patterns(policy)
        yes = is_affirmative(text, *pats)
    if not yes:
        return None
    args = dict(step.arguments)
    tool = args.pop("tool", None) or args.pop("action", None)
    return Confirmation(time_ns=step.end_ns, tool=str(tool) if tool else None, args=args, source="tool")


_PATTERNS: dict[tuple[str, str], tuple[PolicyPattern, PolicyPattern]] = {}


def _patterns(policy: Policy) -> tuple[PolicyPattern, PolicyPattern]:
    key = (policy.confirmation.affirm, policy.confirmation.deny)
    pats = _PATTERNS.get(key)
    if pats is None:
        pats = (compile_pattern(key[0], ignore_case=True), compile_pattern(key[1], ignore_case=True))
        _PATTERNS[key] = pats
    return pats


def keep(store: dict[str, Any], conf: Confirmation) -> None:
    kept: list[Confirmation] = store.setdefault("confirmations", [])
    kept.append(conf)
    if len(kept) > MAX_KEPT:
        del kept[0]


def _compare(policy: Policy, tool: str, arg: str, a: Any, b: Any) -> bool:
    tp = policy.tools.get(tool)
    specs = tp.arguments.get(arg) if tp is not None else None
    if specs:
        from ..model.normalise import ArgumentRule

        return ArgumentRule(specs).matches(a, b)
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return False
    return bool(a == b) or (isinstance(a, str) and isinstance(b, str) and a.casefold() == b.casefold())


def covers(conf: Confirmation, step: ToolStep, tp: ToolPolicy, policy: Policy) -> bool:
    """Names this tool (or none), states only values equal to the call's, before the call;
    unused, and not promised by the guard to another call."""
    if conf.used or conf.time_ns > step.start_ns or conf.tool not in (None, step.tool):
        return False
    held = conf.held
    if held is not None and not held.admits(step):
        return False
    call = step.arguments
    wanted = tp.confirm_arguments
    if wanted is not None and any(a not in conf.args for a in wanted if a in call):
        return False  # the policy names what must be confirmed, and this confirmation does not say it
    for arg, value in conf.args.items():
        if (wanted is not None and arg not in wanted) or arg not in call:
            continue
        if not _compare(policy, step.tool, arg, value, call[arg]):
            return False
    return True


def message_confirmation(step: ToolStep, t: Trajectory, tp: ToolPolicy, policy: Policy) -> Confirmation | None:
    """From the captured dialogue: a user's yes, in answer to a proposal that asked for agreement
    and showed the call's key values (see :mod:`.dialogue`). ``None`` if content is absent or no
    yes covers the call."""
    found = reading_at(step, t, policy)
    if found is None or found[0].key is None:
        return None
    chat_end = t.extra["dialogue"][0][0]
    return Confirmation(time_ns=chat_end, tool=step.tool, args={}, source="messages", key=found[0].key)


def _store(t: Trajectory) -> dict[str, Any]:
    conv = t.conversation
    return conv.extra if conv is not None else t.extra


def why_not(step: ToolStep, t: Trajectory, policy: Policy) -> dict[str, Any]:
    """The reason fields of a write no confirmation covers (read from the dialogue when there is
    one): ``reason`` and, as they apply, ``not_shown``, ``changed_after_agreement``, ``reply`` and
    ``proposal`` (span and message indexes). Called only when a finding is made."""
    if not policy.confirmation.from_messages:
        return {"reason": "not_asked"}
    store = _store(t)
    return reasons(step, t, policy, store.get("used_turns", ()), store.get("agreed_calls", {}))


def confirmation_showed(step: ToolStep, t: Trajectory, policy: Policy, value: Any) -> bool:
    """Whether the user's yes that covers ``step`` (in the dialogue) answered a proposal showing
    ``value``: normalised as key values are (case, spaces, separators, currency, dates).

    For rules that ask whether the user saw a value before agreeing (e.g. an untrusted one).
    ``False`` when no yes in the dialogue covers the call. Reads only: nothing is used up.
    """
    found = reading_at(step, t, policy)
    if found is None or found[0].key is None or found[0].reply is None:
        return False
    r = found[0]
    d = t.extra["dialogue"][1]
    return any(shows(value, d.text(i)) for i in (*r.proposal, r.reply))


def used_turns(t: Trajectory) -> set[Any]:
    conv = t.conversation
    store = conv.extra if conv is not None else t.extra
    return store.setdefault("used_turns", set())  # type: ignore[no-any-return]


def held_turns(t: Trajectory) -> dict[Any, Hold]:
    """Chat turns (confirmations read from messages) the guard promised to running calls."""
    conv = t.conversation
    store = conv.extra if conv is not None else t.extra
    return store.setdefault("held_turns", {})  # type: ignore[no-any-return]


def covering(step: ToolStep, t: Trajectory, policy: Policy) -> Confirmation | None:
    """The confirmation this call would use: the first kept one that covers it, else (with
    ``from_messages``) an unused chat turn that does. Reads only: nothing is used up here."""
    tp = policy.tools[step.tool]
    conv = t.conversation
    stores = (conv.extra, t.extra) if conv is not None else (t.extra,)  # the conversation's earlier turns first
    for store in stores:
        kept: Sequence[Confirmation] = store.get("confirmations", ())
        for conf in kept:
            if covers(conf, step, tp, policy):
                return conf
    if policy.confirmation.from_messages:
        mc = message_confirmation(step, t, tp, policy)
        if mc is not None:
            conv = t.conversation
            store = conv.extra if conv is not None else t.extra
            if mc.key not in store.get("used_turns", ()):
                held = store.get("held_turns", {}).get(mc.key)
                if held is None or held.admits(step):
                    return mc
    return None


def use(conf: Confirmation, step: ToolStep, t: Trajectory) -> None:
    """``step`` ran on ``conf``: used up if it succeeded (a failed write leaves the user's yes for
    its retry); a promise the guard made for it is kept no longer."""
    if conf.source == "messages":
        if step.ok:
            used_turns(t).add(conf.key)
        held_turns(t).pop(conf.key, None)
        agreed: dict[Any, Any] = _store(t).setdefault("agreed_calls", {})
        agreed[conf.key[0]] = conf.key[1]  # the action it covered: tool and key values
        while len(agreed) > MAX_KEPT:
            del agreed[next(iter(agreed))]
    else:
        conf.used = step.ok
        conf.held = None


def hold(conf: Confirmation, promise: Hold, t: Trajectory) -> None:
    """The guard promises ``conf`` to a call it allowed: no other call may use it meanwhile."""
    if conf.source == "messages":
        held_turns(t)[conf.key] = promise
    else:
        conf.held = promise


def release(conf: Confirmation, promise: Hold, t: Trajectory) -> None:
    """A promise whose call is over (or never started) is dropped, if nothing used it since."""
    if conf.source == "messages":
        turns = held_turns(t)
        if turns.get(conf.key) is promise:
            del turns[conf.key]
    elif conf.held is promise:
        conf.held = None
