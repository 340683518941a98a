"""``tainted_argument``: a sink argument whose value first appeared in untrusted content.

A sink (``policy.taint``: declared, or by default a write's arguments and URL arguments) carries a
value found in an earlier tool result of the run or conversation, and not in the user's messages,
the system prompt or a trusted result. Critical when nothing the user's request pointed at leads to
the content it came from (the source call's arguments are not in the user's words, nor in content
pointed at, ``taint.pointing_hops`` deep), or when that content, reached through a step the user's
pointing named, is instruction-shaped: the injected action. A warning when the user named the
content and it gives instructions; ``taint.plain_pointed`` when it gives none. A warning is
cleared by a confirmation that showed the value. Tool results are read into tokens only when a sink needs
them (:mod:`..reading.provenance`); the guard asks the same question before the call.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from ..model.rule_names import Severity
from ..model.trajectory import ToolStep, Trajectory, short_hash
from ..policy.policy import Policy
from ..reading import provenance as pv
from ..reading.content import messages_of
from ..reading.span_values import result_text
from .check import Check, Event, applies_to

_KEY = "taint"  # rule-owned state: a Provenance on the run's and the conversation's extra
_TRUSTED = "taint_trusted"  # the latest model call read (a span: dropped at the run's end) and its trusted tokens
_NONE: list[int] = []  # no tokens (never appended to)
MAX_PENDING_TURNS = 4  # finished turns whose results were not read yet, kept by their conversation


def sinks_of(policy: Policy, step: ToolStep) -> list[tuple[str, str, str]]:
    """The sink arguments of a call: ``(argument, type, value)`` (string values only)."""
    taint = policy.taint
    declared, write = policy.sinks_for(step.tool)
    if declared is None and not write:
        raw = step.raw_arguments
        if not taint.default_sinks or isinstance(raw, str) and taint.url_argument.search(raw) is None:
            return []  # one search of the raw arguments: most reads have no URL argument
    out: list[tuple[str, str, str]] = []
    for arg, value in step.arguments.items():
        if not isinstance(value, str) or not value:
            continue
        kind = declared.get(arg) if declared is not None else None
        if kind is None and taint.default_sinks:
            kind = "url" if arg.lower() in taint.url_names else "text" if write else None
        if kind is not None:
            out.append((arg, kind, value))
    return out


def value_tokens(kind: str, value: str) -> tuple[list[int], list[str]]:
    """The tokens a sink value is looked up by, and (for reports) the normalised values."""
    if kind == "url":
        normal = pv.normal_url(value)
        host = pv.url_host(normal)
        return [pv.token("url", normal), pv.token("url", host)], [normal, host]
    if kind in ("iban", "email", "phone"):
        normal = pv.normal_value(kind, value)
        return [pv.token(kind, normal)], [normal]
    if kind in ("account_id", "password"):
        normal = pv.normal_value("word", value)
        return [pv.token("word", normal)], [normal]
    found = pv.identifiers(value)  # free text: judged by its identifiers (a cheap test first)
    if not found:
        return _NONE, []
    return [pv.token(k, v) for k, v in found], [v for _, v in found]


def _provenance(check: Check, t: Trajectory) -> pv.Provenance:
    """The run's tokens, its results read up to now (each once)."""
    taint = check.policy.taint
    prov: pv.Provenance | None = t.extra.get(_KEY)
    if prov is None:
        prov = t.extra.setdefault(_KEY, pv.Provenance(taint.max_bytes))
    steps = t.steps
    while (i := prov.cursor) < len(steps):  # the guard may read alongside the processor: at worst twice
        prov.cursor = i + 1
        s = steps[i]
        _read(prov, check.policy, s.tool, s.span_id, s.arguments, result_text(s.raw_result))
    return prov


def _read(prov: pv.Provenance, policy: Policy, tool: str, span_id: int, arguments: dict[str, Any],
          text: str | None) -> None:
    if not text:
        return
    taint = policy.taint
    trusted: frozenset[str] | None = None if tool in taint.trusted_tools else frozenset(
        taint.trusted_fields.get(tool, ()))
    prov.read(tool, span_id, arguments, text, trusted, taint.needs_words, taint.instructs)


def _conversation(check: Check, t: Trajectory) -> pv.Provenance | None:
    conv = t.conversation
    if conv is None:
        return None
    prov: pv.Provenance | None = conv.extra.get(_KEY)
    if prov is not None and prov.pending:
        for turn in prov.pending:
            for s in turn.steps[turn.start:]:
                _read(prov, check.policy, s.tool, s.span_id, s.arguments, result_text(s.raw_result))
        prov.pending = []
    return prov


def _trusted(t: Trajectory, before_ns: int) -> tuple[set[int], str]:
    """Tokens and lower-cased text of the user's messages and the system prompt seen by the latest
    model call before ``before_ns`` (cached per call)."""
    for key in ("last_chat", "prev_chat"):
        chat = t.extra.get(key)
        if chat is not None and chat[0] <= before_ns:
            cached = t.extra.get(_TRUSTED)
            if cached is not None and cached[0] is chat[1]:
                return cached[1], cached[2]
            msgs = messages_of(chat[1]) or []
            text = "\n".join(m.text for m in msgs if m.role in ("user", "system") and m.text)
            found = (pv.trusted_tokens(text), text.lower())
            t.extra[_TRUSTED] = (chat[1], found[0], found[1])
            return found
    return set(), ""


def _confirmed(t: Trajectory, step: ToolStep, arg: str, value: str) -> bool:
    """Whether a kept confirmation for this tool showed this value of ``arg``."""
    conv = t.conversation
    for store in (t.extra, conv.extra if conv is not None else {}):
        for conf in store.get("confirmations", ()):
            shown = getattr(conf, "args", {}).get(arg)
            if getattr(conf, "tool", None) in (step.tool, None) and isinstance(shown, str) and \
                    " ".join(shown.split()).lower() == " ".join(value.split()).lower():
                return True
    return False


def _sink_tools(policy: Policy) -> Container[str]:
    return policy.sink_tools if policy.taint.enabled else frozenset()


@applies_to((ToolStep,), _sink_tools, guard=True)
def tainted_argument(event: Event, check: Check) -> list[Any] | None:
    t = check.trajectory
    conv = t.conversation
    if not isinstance(event, ToolStep) or not t.steps and (conv is None or _KEY not in conv.extra):
        return None
    wanted = []
    for arg, kind, value in sinks_of(check.policy, event):
        tokens, normals = value_tokens(kind, value)
        if tokens:  # a value with no identifier in it can come from nowhere we can tell
            wanted.append((arg, kind, value, tokens, normals))
    if not wanted:
        return None
    own = _provenance(check, t)
    earlier = _conversation(check, t)
    out: list[Any] = []
    trusted: tuple[set[int], str] | None = None
    for arg, kind, value, tokens, normals in wanted:
        hit: pv.Source | None = None
        hit_at = -1
        vouched = False  # a trusted result holds the value (or its host): clean
        for i, tok in enumerate(tokens):
            for store in (own, earlier):
                src = store.tokens.get(tok) if store is not None else None
                if src is None:
                    continue
                if src.trusted:
                    vouched = True
                elif hit is None:
                    hit, hit_at = src, i
        if hit is None or vouched:
            continue
        if trusted is None:
            trusted = _trusted(t, event.start_ns)
        if any(tok in trusted[0] for tok in tokens) or _confirmed(t, event, arg, value):
            continue
        hops = pv.pointed(hit, trusted[1], [s for s in (own, earlier) if s is not None], check.policy.taint.pointing_hops)
        severity = _severity(hops, hit.instructs, check.policy.taint.plain_pointed)
        if severity != "critical" and check.preview is not None:
            continue  # the guard stops the injected action; a warning is reported once the call ran
        out.append(_finding(check, event, arg, kind, normals[hit_at], hit, hops, severity))
    return out or None


_SAID = ("", ", which gives orders", ", which addresses the agent with instructions")
_INSTRUCTIONS = ("none", "orders", "addresses_agent")


def _severity(hops: int, instructs: int, plain: Severity) -> Severity:
    """Critical: content nobody pointed at, or instruction-shaped content reached through what the
    user pointed at; a warning: instruction-shaped content the user named; else ``plain``
    (``taint.plain_pointed``)."""
    if not hops or instructs and hops > 1:
        return "critical"
    return "warning" if instructs else plain


def _finding(check: Check, step: ToolStep, arg: str, kind: str, normal: str, src: pv.Source, hops: int,
             severity: Severity) -> Any:
    shown = normal if check.policy.taint.show_values else f"sha256:{short_hash(normal)}"
    where = f"{src.tool} result field {src.field!r}"
    said = _SAID[src.instructs]
    if hops:
        via = "" if hops == 1 else f" (through {hops - 1} step{'s' if hops > 2 else ''} it named)"
        message = (f"{step.tool} argument {arg} ({kind}) carries a value from {where}{said}, content the user asked "
                   f"the agent to act on{via}; a confirmation showing the value clears it")
    else:
        message = (f"{step.tool} argument {arg} ({kind}) carries a value that first appeared in {where}{said}, "
                   f"content the user's request did not point at (possible injected action)")
    return check.violation("tainted_argument", severity, message, step,
                           argument=arg, value_type=kind, value=shown, source_tool=src.tool, source_field=src.field,
                           source_span_id=format(src.span_id, "016x"), user_pointed=bool(hops), pointed_hops=hops,
                           instructions=_INSTRUCTIONS[src.instructs])


def carry_over(t: Trajectory, policy: Policy) -> None:
    """At a run's end (called by the engine when taint is on): its tokens, and its steps not read yet
    (by reference), go to its conversation; what its bounds trimmed is counted on the run."""
    own: pv.Provenance | None = t.extra.get(_KEY)
    conv = t.conversation
    if conv is None or not t.steps:
        if own is not None:
            t.state_dropped += own.trimmed  # counted by the engine as state not kept
        return
    prov: pv.Provenance | None = conv.extra.get(_KEY)
    if prov is None:
        prov = conv.extra[_KEY] = pv.Provenance(policy.taint.max_bytes)
    start = 0
    if own is not None:
        prov.merge(own)
        prov.trimmed += own.trimmed
        start = own.cursor
    if start < len(t.steps):
        prov.pending.append(pv.PendingTurn(t.steps, start))
        if len(prov.pending) > MAX_PENDING_TURNS:
            prov.trimmed += len(prov.pending.pop(0).steps)
    t.state_dropped += prov.trimmed - prov.counted
    prov.counted = prov.trimmed
