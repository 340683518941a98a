"""The policy's ``taint`` section: where untrusted content comes from (sources) and which
arguments must not carry it (sinks), for the ``tainted_argument`` rule. See ``docs/taint.md``.

```yaml
taint:
  trusted_tools: [get_channels]                         # whole results trusted
  trusted_fields: {read_channel_messages: [sender]}     # these fields of its results trusted
  sinks:                                                # tool -> argument -> value type
    send_money: {recipient: iban, subject: text}
    get_webpage: {url: url}
```

Defaults: every tool result is untrusted, the user's messages and the system prompt are trusted;
besides the declared sinks, the string arguments of writes (judged by the IBANs, e-mail
addresses, URLs and phone numbers in them) and arguments named like a URL (``url_arguments``)
of tools that reach outside (by name: ``outside_words``) are sinks (``default_sinks: false``
keeps only the declared ones).

Severity by provenance: content the user's request pointed at (named directly, or reached from such
content within ``pointing_hops``) is a warning when it gives instructions (``instructions``: the
built-in phrases plus the policy's), else ``plain_pointed``; any other content, critical.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Literal

from pydantic import Field, field_validator

from ..model.patterns import MAX_TEXT, PolicyPattern, compile_pattern
from .sections import _Model

ValueType = Literal["iban", "email", "url", "phone", "account_id", "password", "text"]
VALUE_TYPES: tuple[str, ...] = ("iban", "email", "url", "phone", "account_id", "password", "text")
# types whose value is compared whole (a word of the content), not by the identifiers in it
WHOLE_VALUE_TYPES = frozenset({"account_id", "password"})
_ACT = (r"(?:send|forward|transfer|pay|wire|visit|go to|open|click|post|publish|invite|add|remove|delete|share|"
        r"e-?mail|message|call|update|change|reset|buy|order|download|upload|grant|give|reply)")
# Instruction-shaped content (regular expressions, case ignored). It *addresses the agent*
# (ADDRESSES_AGENT; a policy adds its own with ``taint.instructions``): speaks to the assistant,
# overrides its task or puts something before it. Or it *gives orders* (GIVES_ORDERS): a request to
# act addressed to "you", a sentence that opens with an action verb (content that is data rarely
# does; directions such as "(visit website for details ...)" do not open a sentence).
ADDRESSES_AGENT: tuple[str, ...] = (
    r"\b(?:ai|language) (?:model|assistant|agent)\b",
    r"\b(?:to you|dear|hey|hi|attention|note to),? (?:the )?(?:ai|assistant|agent|model|llm|bot|chatbot)\b",
    r"(?:ignore|disregard|forget)\b(?: \w+){0,3} (?:previous|prior|above|earlier|original|other)\b",  # glued on too
    r"\b(?:new|updated|important|additional) instructions?\b",
    r"\bsystem[ _]?(?:message|prompt|instruction|override)\b",
    r"\bbefore you (?:can|do|start|continue|proceed|solve|answer|reply|finish)\b",
    r"\b(?:do|perform|complete) (?:this|the following|these)(?: \w+)? (?:first|instead)\b",
    rf"(?:^|[.!?:>]\s*){_ACT}\b(?:[^.!?\n]|\.(?=\S)){{0,80}}\b(?:first|instead|immediately|right away)\b",
)
GIVES_ORDERS: tuple[str, ...] = (
    rf"\b(?:can|could|would|will) you (?:please |kindly )?{_ACT}\b",
    rf"\byou (?:must|should|need to|have to|are required to) (?:now |first |also )?{_ACT}\b",
    rf"\bplease (?:also |now |first )?{_ACT}\b",
    rf"(?:^\s*|[.!?]\s+|:\s*)(?:do |now |then |also )?(?:{_ACT}|concatenate|summari[sz]e|collect|copy|export)\b",
)
ORDERS, ADDRESSED = 1, 2  # how instruction-shaped some content is (0: not at all)


class TaintPolicy(_Model):
    enabled: bool = True
    trusted_tools: list[str] = []
    trusted_fields: dict[str, list[str]] = {}
    sinks: dict[str, dict[str, ValueType]] = {}
    default_sinks: bool = True
    url_arguments: list[str] = ["url", "uri", "link", "href", "website", "endpoint"]
    # a tool reaches outside when its name holds one of these: its URL arguments are sinks
    outside_words: list[str] = ["fetch", "browse", "http", "web", "url", "download", "visit", "navigate", "scrape",
                                "crawl", "link", "open_page"]
    max_bytes: int = Field(default=65_536, ge=1_024, le=64 * 1_048_576)  # per run, and per conversation
    show_values: bool = False  # findings carry the sink value in clear (only if content may go to logs)
    # content a pointed-at result names is pointed at too, this many steps from the user's words
    pointing_hops: int = Field(default=2, ge=1, le=4)
    instructions: list[str] = []  # phrases (regular expressions) of content addressing the agent, added
    # a value from pointed-at content that gives no instructions: a warning, or info (not an alert)
    plain_pointed: Literal["warning", "info"] = "warning"

    @field_validator("instructions")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        for v in value:
            compile_pattern(v, ignore_case=True)  # ValueError: why it is refused
        return value

    @functools.cached_property
    def _phrases(self) -> tuple[re.Pattern[str], re.Pattern[str], list[PolicyPattern]]:
        def one(phrases: tuple[str, ...]) -> re.Pattern[str]:
            return re.compile("|".join(f"(?:{p})" for p in phrases), re.IGNORECASE | re.MULTILINE)

        return one(ADDRESSES_AGENT), one(GIVES_ORDERS), [compile_pattern(p, ignore_case=True) for p in self.instructions]

    def instructs(self, text: str) -> int:
        """How instruction-shaped some content is: ``ADDRESSED`` (it addresses the agent: the built-in
        phrases or the policy's ``instructions``), ``ORDERS`` (it gives orders), 0 (neither). Asked on
        sink decisions only."""
        addressed, orders, added = self._phrases
        text = text[:MAX_TEXT]  # the head, as every policy pattern searches (model/patterns.py)
        if addressed.search(text) is not None or any(p.search(text) is not None for p in added):
            return ADDRESSED
        return ORDERS if orders.search(text) is not None else 0

    @functools.cached_property
    def needs_words(self) -> bool:
        """Whether some sink compares whole values (account ids, passwords): then the words of
        untrusted content are kept too, not only its typed identifiers."""
        return any(t in WHOLE_VALUE_TYPES for args in self.sinks.values() for t in args.values())

    @functools.cached_property
    def url_names(self) -> frozenset[str]:
        return frozenset(n.lower() for n in self.url_arguments)

    def reaches_outside(self, tool: str) -> bool:
        """Whether a tool's name says it reaches outside (``outside_words``)."""
        name = tool.lower()
        return any(w in name for w in self.outside_words)

    @functools.cached_property
    def url_argument(self) -> re.Pattern[str]:
        """Finds a URL-named argument in a call's raw (JSON) arguments: one search, no parsing."""
        names = "|".join(re.escape(n) for n in sorted(self.url_names)) or "(?!)"
        return re.compile(rf"[\"']({names})[\"']\s*:", re.IGNORECASE)


class SinkTools:
    """The tools ``tainted_argument`` looks at, as a container (decided per tool name by the engine's
    plan, so other tools cost nothing): declared sinks, writes, tools that reach outside."""

    __slots__ = ("_is_write", "_taint")

    def __init__(self, taint: TaintPolicy, is_write: Callable[[str], bool]) -> None:
        self._taint = taint
        self._is_write = is_write

    def __contains__(self, tool: object) -> bool:
        if not isinstance(tool, str):
            return False
        taint = self._taint
        if tool in taint.sinks:
            return True
        return taint.default_sinks and (self._is_write(tool) or taint.reaches_outside(tool))
