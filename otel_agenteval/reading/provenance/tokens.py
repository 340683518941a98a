"""Where a value came from: the identifiers of tool results kept as hashed, normalised tokens.

A tool result is read once, when a sink first needs it: its IBANs, e-mail addresses, URLs and phone
numbers (and, when some sink compares whole values, its words) are normalised by type (IBAN
spacing and case, URL scheme and ``www.``, e-mail case, phone punctuation) and kept as hashes with
the result's tool and field, in a :class:`Provenance` bounded in bytes (what does not fit is counted,
not kept). Values never stay in clear: only their hashes and the source step's argument values
(what the user may have pointed at) are held.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

from .identifiers import identifiers, is_identifier, normal_url, normal_value

_WORD: Final = re.compile(r"[\w@+-][\w.@+-]{2,}")
_FIELD_LINE: Final = re.compile(r"^\s*(?:-\s+)?([A-Za-z_][\w.-]*):(?:\s+(.*))?$")
TOKEN_BYTES: Final = 16  # what one kept token is counted as against the byte bound
MAX_POINTERS: Final = 8  # argument values of a source step kept to tell whether the user named it


def token(kind: str, normal: str) -> int:
    """The hash a normalised value is kept as (in this process only: tokens are never written out)."""
    return hash(kind + "\x00" + normal)


def tokens_of(text: str, words: bool) -> list[int]:
    """The tokens of some content: its identifiers, and its words when ``words``."""
    out = [token(k, v) for k, v in identifiers(text)]
    if words:
        out.extend(token("word", normal_value("word", w)) for w in _WORD.findall(text))
    return out


def result_fields(text: str) -> list[tuple[str, str]]:
    """A tool result's text by field: ``(field, text)``. JSON objects by key (the innermost key of
    each value), YAML-like ``key: value`` lines by key (following lines belong to it), else one
    field ``result``."""
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError:
            return [("result", text)]
        out: list[tuple[str, str]] = []
        _walk(data, "result", out)
        return out
    out = []
    name = "result"
    lines: list[str] = []
    for line in text.splitlines():
        m = _FIELD_LINE.match(line)
        if m is not None:
            if lines:
                out.append((name, "\n".join(lines)))
            name = m.group(1)
            lines = [m.group(2) or ""]
        else:
            lines.append(line)
    if lines:
        out.append((name, "\n".join(lines)))
    return out


def _walk(data: Any, name: str, out: list[tuple[str, str]]) -> None:
    if isinstance(data, dict):
        for k, v in data.items():
            _walk(v, str(k), out)
    elif isinstance(data, list):
        for v in data:
            _walk(v, name, out)
    elif data is not None:
        out.append((name, str(data)))


def pointers_of(arguments: dict[str, Any]) -> list[str]:
    """The string argument values of a source step, normalised: what a user naming it would say."""
    out: list[str] = []
    for v in arguments.values():
        if isinstance(v, str) and len(v.strip()) >= 3:
            s = v.strip().lower()
            out.append(normal_url(s) if is_identifier(s) and "." in s else s)
            if len(out) >= MAX_POINTERS:
                break
    return out


class Source:
    """Where tokens first appeared: a tool result's field (and whether the policy trusts it)."""

    __slots__ = ("field", "hops", "hops_for", "instructs", "pointers", "span_id", "tool", "trusted")

    def __init__(self, tool: str, field: str, span_id: int, pointers: list[str], trusted: bool,
                 instructs: int = 0) -> None:
        self.tool = tool
        self.field = field
        self.span_id = span_id
        self.pointers = pointers  # the source call's argument values, normalised
        self.trusted = trusted
        self.instructs = instructs  # how instruction-shaped the field's text is (0: not; 1: orders; 2: addresses the agent)
        self.hops_for: str | None = None  # the user's words ``hops`` was found for (one text per model call)
        self.hops = 0


class Provenance:
    """The tokens of one run's (or conversation's) tool results, bounded in bytes; trims counted."""

    __slots__ = ("counted", "cursor", "max_bytes", "shadowed", "size", "tokens", "trimmed")

    def __init__(self, max_bytes: int) -> None:
        self.tokens: dict[int, Source] = {}  # first untrusted source of a token; a trusted one overrides
        self.max_bytes = max_bytes
        self.size = 0
        self.trimmed = 0  # tokens not kept: the bound was reached
        self.cursor = 0  # steps of the run read so far
        self.counted = 0  # trims already counted by the engine
        self.shadowed: dict[int, Source] = {}  # an untrusted first source a trusted one overrode (for pointing)

    def read(self, tool: str, span_id: int, arguments: dict[str, Any], result: str,
             trusted_fields: frozenset[str] | None, words: bool, instructs: Callable[[str], int]) -> None:
        """Keep the tokens of one tool result; ``trusted_fields`` (``None``: every field) are trusted;
        ``instructs`` tells how instruction-shaped a field's text is."""
        pointers: list[str] | None = None
        for name, text in result_fields(result):
            found = tokens_of(text, words)
            if not found:
                continue
            trusted = trusted_fields is None or name in trusted_fields
            if pointers is None:
                pointers = pointers_of(arguments)
            src = Source(tool, name, span_id, pointers, trusted, 0 if trusted else instructs(text))
            self.size += TOKEN_BYTES + sum(len(p) for p in pointers)
            self.keep(found, src)

    def keep(self, found: list[int], src: Source) -> None:
        tokens = self.tokens
        for tok in found:
            old = tokens.get(tok)
            if old is None:
                if self.size + TOKEN_BYTES > self.max_bytes:
                    self.trimmed += 1
                    continue
                self.size += TOKEN_BYTES
                tokens[tok] = src
            elif src.trusted and not old.trusted:
                tokens[tok] = src
                if self.size + TOKEN_BYTES <= self.max_bytes:
                    self.size += TOKEN_BYTES
                    self.shadowed[tok] = old

    def merge(self, other: Provenance) -> None:
        """Take ``other``'s tokens (a finished turn's, into its conversation's), within the bound."""
        for tok, src in other.tokens.items():
            self.keep([tok], src)
        for tok, src in other.shadowed.items():
            if tok not in self.shadowed and self.size + TOKEN_BYTES <= self.max_bytes:
                self.size += TOKEN_BYTES
                self.shadowed[tok] = src


def pointed(src: Source, trusted_text: str, stores: list[Provenance], hops: int) -> int:
    """How far the user's words are from the source step: 1 when they name it (one of its argument
    values), ``n`` when they name a step whose untrusted result names one of its argument values,
    ``n - 1`` steps on (at most ``hops``); 0 when nothing the user pointed at leads to it. Kept on
    the source for the same user's words (results read later do not point back in time)."""
    if src.hops_for is not trusted_text:
        src.hops, src.hops_for = _pointed(src, trusted_text, stores, hops), trusted_text
    return src.hops


def _pointed(src: Source, trusted_text: str, stores: list[Provenance], hops: int) -> int:
    if any(p in trusted_text for p in src.pointers):
        return 1
    if hops <= 1:
        return 0
    for p in src.pointers:
        for tok in (token("url", p), token("email", p), token("word", normal_value("word", p))):
            for store in stores:
                via = store.tokens.get(tok)
                if via is not None and via.trusted:
                    via = store.shadowed.get(tok)
                if via is not None and via.span_id != src.span_id:
                    n = _pointed(via, trusted_text, stores, hops - 1)
                    if n:
                        return n + 1
    return 0


def trusted_tokens(text: str) -> set[int]:
    """The tokens of trusted text (the user's messages, the system prompt), words included."""
    return set(tokens_of(text, True))
