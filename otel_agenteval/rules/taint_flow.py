"""``tainted_argument``'s path at a write, compiled with the hot path: the call's sink values, their
tokens looked up in the run's and the conversation's tool results, and a run's tokens carried into
its conversation at its end. :mod:`.taint` is the rule around it (what it says of a hit).

A write whose sink values hold no identifier (most of them) is decided without making an object.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..model.arguments import parse_arguments
from ..model.trajectory import Conversation, ToolStep, Trajectory, UnreadResults, more_unread
from ..policy.policy import Policy
from ..reading.content import messages_of
from ..reading.provenance import identifiers as ids
from ..reading.provenance import tokens as pv
from ..reading.span_values import result_text
from .check import Check

KEY: Final = "taint"  # rule-owned state: a Provenance on the run's and the conversation's extra
TRUSTED: Final = "taint_trusted"  # the latest model call read (a span: dropped at the run's end) and its trusted tokens
MAX_TOOLS: Final = 4096  # tool names whose sinks CallTest keeps, as the engine's plans
_WHOLE_VALUES: Final = {"iban": "iban", "email": "email", "phone": "phone", "account_id": "word", "password": "word"}


class Hit:
    """A sink argument whose value came from an untrusted tool result no one vouched for."""

    __slots__ = ("arg", "hops", "kind", "normal", "severity", "source")

    def __init__(self, arg: str, kind: str, normal: str, source: pv.Source, hops: int, severity: str) -> None:
        self.arg = arg
        self.kind = kind
        self.normal = normal  # the value as compared (reported by its hash unless ``show_values``)
        self.source = source
        self.hops = hops  # how far the user's words are from the source (0: not pointed at)
        self.severity = severity


def value_tokens(kind: str, value: str) -> tuple[list[int], list[str]] | None:
    """The tokens a sink value is looked up by, and (for reports) the normalised values; ``None``
    for free text with no identifier in it (a cheap test first)."""
    if kind == "url":
        normal = ids.normal_url(value)
        host = ids.url_host(normal)
        return [pv.token("url", normal), pv.token("url", host)], [normal, host]
    as_kind = _WHOLE_VALUES.get(kind)
    if as_kind is not None:
        normal = ids.normal_value(as_kind, value)
        return [pv.token(as_kind, normal)], [normal]
    found = ids.identifiers(value)
    if not found:
        return None
    return [pv.token(k, v) for k, v in found], [v for _, v in found]


class SinkArguments:
    """Which arguments of a call are sinks, as what type: the policy's ``taint`` settings, read once."""

    __slots__ = ("default_sinks", "url_argument", "url_names")

    def __init__(self, taint: Any) -> None:
        self.default_sinks: bool = taint.default_sinks
        self.url_names: frozenset[str] = taint.url_names
        self.url_argument: re.Pattern[str] = taint.url_argument

    def kind(self, declared: dict[str, str] | None, write: bool, arg: str) -> str | None:
        """The type an argument is compared as, or ``None``: not a sink."""
        kind = declared.get(arg) if declared is not None else None
        if kind is None and self.default_sinks:
            return "url" if arg.lower() in self.url_names else "text" if write else None
        return kind

    def in_call(self, event: ToolStep, declared: dict[str, str] | None, write: bool) -> bool:
        """Whether the call has a sink argument: declared ones, a write's, or a read's URL argument."""
        if declared is not None or write:
            return True
        if not self.default_sinks:
            return False
        raw = event.raw_arguments  # one search of the raw arguments: most reads have no URL argument
        return not isinstance(raw, str) or self.url_argument.search(raw) is not None


class CallTest:
    """``tainted_argument``'s test of a call alone (``applies_to(when=CallTest)``, once per policy):
    whether :func:`hits` may find something, i.e. a sink argument holds a URL, a whole value of its
    type or text that may hold an identifier. A tool's sinks read once; no pattern on a plain value."""

    def __init__(self, policy: Policy) -> None:
        self.arguments = SinkArguments(policy.taint)
        self._sinks_for = policy.sinks_for
        self._sinks: dict[str, tuple[dict[str, str] | None, bool]] = {}

    def __call__(self, event: ToolStep) -> bool:
        tool = event.tool
        sinks = self._sinks.get(tool)
        if sinks is None:
            sinks = self._sinks_for(tool)
            if len(self._sinks) < MAX_TOOLS:  # tool names come from models
                self._sinks[tool] = sinks
        declared, write = sinks
        if not self.arguments.in_call(event, declared, write):
            return False
        for arg, value in event.arguments.items():
            if isinstance(value, str) and value:
                kind = self.arguments.kind(declared, write, arg)
                if kind is not None and (kind == "url" or kind in _WHOLE_VALUES or ids.value_may_hold_identifier(value)):
                    return True
        return False


def hits(event: ToolStep, check: Check) -> list[Hit] | None:
    """The call's sink arguments whose values first appeared in untrusted results: the rule's findings."""
    t = check.trajectory
    conv = t.conversation
    if not t.steps and (conv is None or (KEY not in conv.extra and conv.unread is None)):
        return None
    policy = check.policy
    taint = policy.taint
    declared, write = policy.sinks_for(event.tool)
    sink = SinkArguments(taint)
    if not sink.in_call(event, declared, write):
        return None
    out: list[Hit] | None = None
    own: pv.Provenance | None = None
    earlier: pv.Provenance | None = None
    trusted: tuple[set[int], str] | None = None
    for arg, value in event.arguments.items():
        if not isinstance(value, str) or not value:
            continue
        kind = sink.kind(declared, write, arg)
        if kind is None:
            continue
        looked_up = value_tokens(kind, value)
        if looked_up is None:  # a value with no identifier in it can come from nowhere we can tell
            continue
        tokens, normals = looked_up
        if own is None:
            own = _provenance(policy, t)
            earlier = _conversation(policy, t)
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
        stores = [own] if earlier is None else [own, earlier]
        hops = pv.pointed(hit, trusted[1], stores, taint.pointing_hops)
        severity = severity_of(hops, hit.instructs, taint.plain_pointed)
        if severity != "critical" and check.preview is not None:
            continue  # the guard stops the injected action; a warning is reported once the call ran
        if out is None:
            out = []
        out.append(Hit(arg, kind, normals[hit_at], hit, hops, severity))
    return out


def severity_of(hops: int, instructs: int, plain: str) -> str:
    """Critical: content nobody pointed at, or instruction-shaped content reached through what the
    user pointed at; a warning: instruction-shaped content the user named; else ``plain``
    (``taint.plain_pointed``)."""
    if not hops or instructs and hops > 1:
        return "critical"
    return "warning" if instructs else plain


def _provenance(policy: Policy, t: Trajectory) -> pv.Provenance:
    """The run's tokens, its results read up to now (each once)."""
    prov: pv.Provenance | None = t.extra.get(KEY)
    if prov is None:
        prov = t.extra.setdefault(KEY, pv.Provenance(policy.taint.max_bytes))
    steps = t.steps
    while (i := prov.cursor) < len(steps):  # the guard may read alongside the processor: at worst twice
        prov.cursor = i + 1
        s = steps[i]
        _read(prov, policy, s.tool, s.span_id, s.arguments, result_text(s.raw_result))
    return prov


def _read(prov: pv.Provenance, policy: Policy, tool: str, span_id: int, arguments: dict[str, Any],
          text: str | None) -> None:
    if not text:
        return
    taint = policy.taint
    trusted: frozenset[str] | None = None if tool in taint.trusted_tools else frozenset(
        taint.trusted_fields.get(tool, ()))
    prov.read(tool, span_id, arguments, text, trusted, taint.needs_words, taint.instructs)


def _conversation(policy: Policy, t: Trajectory) -> pv.Provenance | None:
    conv = t.conversation
    if conv is None:
        return None
    if conv.unread is not None:
        return _read_unread(conv, policy)
    prov: pv.Provenance | None = conv.extra.get(KEY)
    return prov


def _read_unread(conv: Conversation, policy: Policy) -> pv.Provenance:
    """The conversation's unread results read into its tokens (its Provenance, made if it has none)."""
    prov: pv.Provenance | None = conv.extra.get(KEY)
    if prov is None:
        prov = conv.extra[KEY] = pv.Provenance(policy.taint.max_bytes)
    unread = conv.unread
    conv.unread = None
    if unread is not None:
        for tool, span_id, args, result in zip(unread["tools"], unread["span_ids"], unread["arguments"],
                                               unread["results"]):
            _read(prov, policy, tool, span_id, parse_arguments(args), result_text(result))
    return prov


def _trusted(t: Trajectory, before_ns: int) -> tuple[set[int], str]:
    """Tokens and lower-cased text of the user's messages and the system prompt seen by the latest
    model call before ``before_ns`` (cached per call)."""
    chat = t.chat_before(before_ns)
    if chat is None:
        return set(), ""
    cached = t.extra.get(TRUSTED)
    if cached is not None and cached[0] is chat[1]:
        return cached[1], cached[2]
    msgs = messages_of(chat[1]) or []
    text = "\n".join(m.text for m in msgs if m.role in ("user", "system") and m.text)
    tokens, lowered = pv.trusted_tokens(text), text.lower()
    t.extra[TRUSTED] = (chat[1], tokens, lowered)
    return tokens, lowered


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


def carry_over(t: Trajectory, policy: Policy) -> None:
    """At a run's end, before its steps are sorted (its tokens' cursor counts them as they came): its
    tokens and unread steps' results go to its conversation; what its bounds trimmed is counted on the run."""
    own: pv.Provenance | None = t.extra.get(KEY)
    conv = t.conversation
    if conv is None or not t.steps:
        if own is not None:
            t.state_dropped += own.trimmed  # counted by the engine as state not kept
        return
    extra = conv.extra
    prov: pv.Provenance | None = extra.get(KEY)
    start = 0
    if own is not None:
        if prov is None:
            prov = extra[KEY] = pv.Provenance(policy.taint.max_bytes)
        prov.merge(own)
        prov.trimmed += own.trimmed
        start = own.cursor
    tools: list[str] = []  # what reading them takes, not the steps (they hold their spans' attributes)
    span_ids: list[int] = []
    arguments: list[Any] = []
    results: list[str] = []
    size = 0
    for s in t.steps[start:]:
        result = s.raw_result
        if result is None:
            continue
        if type(result) is not str:
            result = str(result)
        args = s.raw_arguments
        tools.append(s.tool)
        span_ids.append(s.span_id)
        arguments.append(args)
        results.append(result)
        size += len(result) + (len(args) if type(args) is str else 0)
    if results:
        # a dict display: compiled, calling the TypedDict makes the dict through Python keywords
        added: UnreadResults = {"tools": tuple(tools), "span_ids": tuple(span_ids), "arguments": tuple(arguments),
                                "results": tuple(results), "bytes": size}
        unread = conv.unread = more_unread(conv.unread, added)
        if unread["bytes"] > policy.taint.max_bytes:  # a conversation holds at most about its bound unread
            prov = _read_unread(conv, policy)
    if prov is not None:
        t.state_dropped += prov.trimmed - prov.counted
        prov.counted = prov.trimmed
