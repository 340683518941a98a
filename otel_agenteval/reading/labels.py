"""Label values that come from spans, made safe once, where they enter.

A span attribute can hold anything the SDK accepts: lone surrogates (which no exposition can
encode), control characters, 100k-character names. :func:`safe_label` turns such a value into
valid, printable UTF-8 of bounded length; a long value keeps a prefix and a short hash of the
whole, so distinct long names stay distinct. Plain short names pass through untouched.
:class:`ToolLabels` and :class:`AgentLabels` also cap how many distinct values a label takes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

MAX_LABEL_LEN = 64  # characters of a label value taken from a span
REPLACEMENT = "\ufffd"
OTHER = "other"  # the label value past a cap


def safe_label(value: object, limit: int = MAX_LABEL_LEN) -> str:
    """``value`` as a label value: valid UTF-8, no control characters, at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit and text.isascii() and text.isprintable():
        return text  # the common case: one scan each, no copy
    if len(text) > limit:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
        text = text[: max(limit - 9, 1)] + "~" + digest
    clean = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> "?"
    if not clean.isprintable():
        clean = "".join(ch if ch.isprintable() else REPLACEMENT for ch in clean)
    return clean


class ToolLabels:
    """Tool names for labels, made safe and capped: the policy's tools always, then the first N others."""

    def __init__(self, known: Iterable[str], cap: int) -> None:
        self._allowed = {safe_label(t) for t in known}
        self._cap = len(self._allowed) + cap
        self.overflow = 0  # updates folded into "other" (agenteval_label_overflow_total{label="tool"})

    def __call__(self, tool: str | None, count: bool = True) -> str:
        if tool is None:
            return ""
        label = safe_label(tool)  # a long name keeps a prefix and a hash of the whole
        if label in self._allowed:
            return label
        if len(self._allowed) < self._cap:
            self._allowed.add(label)
            return label
        if count:
            self.overflow += 1
        return OTHER


class AgentLabels:
    """(service_name, agent_name) for labels, made safe and capped.

    The policy's agents always keep their name; other agents, the first ``cap`` pairs seen. Past
    the cap the agent is ``other``, and a service past ``cap`` distinct services is ``other``
    too, so every per-agent series and map is bounded by the cap whatever the spans say.
    """

    def __init__(self, known: Iterable[str], cap: int) -> None:
        self._known = frozenset(safe_label(a) for a in known if a != "*")
        self._cap = cap
        self._pairs: set[tuple[str, str]] = set()
        self._services: set[str] = set()
        self._others = 0  # pairs taken by agents the policy does not name
        self.overflow = 0  # updates folded into "other" (agenteval_label_overflow_total{label="agent_name"})

    def __call__(self, service: str, agent: str, count: bool = True) -> tuple[str, str]:
        pair = (safe_label(service), safe_label(agent))
        if pair in self._pairs:
            return pair
        s, a = pair
        if s not in self._services:
            if len(self._services) < self._cap:
                self._services.add(s)
            else:
                s = OTHER
        if a not in self._known:
            if self._others < self._cap:
                self._others += 1
            else:
                a = OTHER
        if (s, a) != pair and count:
            self.overflow += 1
        self._pairs.add((s, a))
        return s, a
