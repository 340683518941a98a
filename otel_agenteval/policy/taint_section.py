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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Literal

from pydantic import Field

from .sections import _Model

ValueType = Literal["iban", "email", "url", "phone", "account_id", "password", "text"]
VALUE_TYPES: tuple[str, ...] = ("iban", "email", "url", "phone", "account_id", "password", "text")
# types whose value is compared whole (a word of the content), not by the identifiers in it
WHOLE_VALUE_TYPES = frozenset({"account_id", "password"})


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
