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

from ..model.patterns import MAX_TEXT, RE2


def _re2_compile(pattern: str) -> Any:
    if RE2 is None:
        return None  # no RE2 wheel here: Python's re (the policy's patterns say which runs: `check-policy`)
    options = RE2.Options()
    options.case_sensitive = False
    return RE2.compile(pattern, options)


_EMAIL: Final = r"(?P<email>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
_URL: Final = (r"|(?P<url>(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"'`|\])}]+"
               r"|\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|ai|co|uk|de|fr|ch|eu|gov|edu|info|biz|app|dev)"
               r"\b(?:/[^\s<>\"'`|\])}]*)?)")
_IBAN: Final = r"|(?P<iban>\b[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,4})?\b)"
_PHONE: Final = r"\+?\(?\d[\d ().-]{6,}\d"
_IDENT: Final = re.compile(_EMAIL + _URL + _IBAN + f"|(?P<phone>{_PHONE})", re.IGNORECASE)
# the same in linear time (RE2, as the policy's patterns) for longer texts: a tool result is content
# an attacker may write, and Python's backtracking takes seconds on 8 KB of ``a.a.a.``. On short texts
# (sink values) Python's is faster (RE2's wrapper costs ~5 us a match) and bounded. Both leave the
# phone's edges to :func:`_phone`, so both find the same (but for ``\b`` next to non-ASCII letters).
_LINEAR: Final[Any] = _re2_compile(_EMAIL.replace("\\w", "\\pL\\pN_") + _URL + _IBAN + f"|(?P<phone>{_PHONE})")
SHORT_TEXT: Final = 64  # characters up to which Python's re reads a text: faster on a sink value, bounded
# no identifier without one of these (a dot or @, an IBAN's country and check digits, a phone's
# 10 characters, or 8 after a +, as ``identifiers`` keeps no shorter one): text without any skips the long pattern
_MAYBE_IDENT: Final = re.compile(r"[.@]|[A-Za-z]{2}\d\d|\d[\d ().-]{8,}\d|\+\(?\d[\d ().-]{6,}\d")  # no IGNORECASE: faster
_WORD: Final = re.compile(r"[\w@+-][\w.@+-]{2,}")
_FIELD_LINE: Final = re.compile(r"^\s*(?:-\s+)?([A-Za-z_][\w.-]*):(?:\s+(.*))?$")
_SCHEME: Final = re.compile(r"^[a-z][a-z0-9+.-]*://")
TOKEN_BYTES: Final = 16  # what one kept token is counted as against the byte bound
MAX_POINTERS: Final = 8  # argument values of a source step kept to tell whether the user named it


def normal_url(value: str) -> str:
    """A URL as host and path: no scheme, no ``www.``, host lower-cased, no fragment or trailing ``/``."""
    v = _SCHEME.sub("", value.strip().lower()).split("#", 1)[0].rstrip(".,;:!?/")
    return v[4:] if v.startswith("www.") else v


def url_host(normal: str) -> str:
    return normal.split("/", 1)[0].split("?", 1)[0]


def normal_value(kind: str, value: str) -> str:
    """``value`` normalised as a value of ``kind`` (iban, email, url, phone; other kinds: a word)."""
    if kind == "url":
        return normal_url(value)
    if kind == "iban":
        return value.replace(" ", "").upper()
    if kind == "phone":
        return "".join(c for c in value if c.isdigit())
    return value.strip().strip(".,;:!?\"'()").lower()


def token(kind: str, normal: str) -> int:
    """The hash a normalised value is kept as (in this process only: tokens are never written out)."""
    return hash(kind + "\x00" + normal)


def may_hold_identifier(text: str) -> bool:
    """A cheap test: ``False`` means :func:`identifiers` finds nothing in ``text``."""
    return _MAYBE_IDENT.search(text) is not None


def identifiers(text: str) -> list[tuple[str, str]]:
    """The typed identifiers in ``text`` (its head: :data:`~..model.patterns.MAX_TEXT` characters):
    ``(kind, normalised value)``, URLs also by their host."""
    out: list[tuple[str, str]] = []
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT]
    if _MAYBE_IDENT.search(text) is None:
        return out
    for m in (_IDENT if len(text) <= SHORT_TEXT or _LINEAR is None else _LINEAR).finditer(text):
        kind = m.lastgroup or ""
        value = m.group()
        if kind == "phone":
            value = _phone(text, m.start(), m.end())
            if value is None:
                continue
        normal = normal_value(kind, value)
        if kind == "phone" and not (10 if value[0] != "+" else 8) <= len(normal) <= 15:
            continue
        out.append((kind, normal))
        if kind == "url":
            host = url_host(normal)
            if host != normal:
                out.append(("url", host))
    return out


def _phone(text: str, start: int, end: int) -> str | None:
    """What ``re``'s ``(?<![\\w-])`` and ``(?![\\w-])`` keep of a phone match: from its first place
    that no word character or ``-`` comes right before, its longest head that ends in a digit no word
    character or ``-`` follows, at least 8 characters from its first digit. One pass: a later start
    finds no other end."""
    for i in range(start, end - 7):
        if i and _wordish(text[i - 1]):
            continue
        first = i + (text[i] == "+")
        first += text[first] == "("
        if not text[first].isdigit():
            continue
        for stop in range(end, first + 7, -1):
            if text[stop - 1].isdigit() and (stop == len(text) or not _wordish(text[stop])):
                return text[i:stop]
        return None
    return None


def _wordish(c: str) -> bool:
    return c.isalnum() or c == "_" or c == "-"


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


def _is_identifier(s: str) -> bool:
    """Whether ``s`` is one identifier, whole."""
    return (_IDENT if len(s) <= SHORT_TEXT or _LINEAR is None else _LINEAR).fullmatch(s) is not None


def pointers_of(arguments: dict[str, Any]) -> list[str]:
    """The string argument values of a source step, normalised: what a user naming it would say."""
    out: list[str] = []
    for v in arguments.values():
        if isinstance(v, str) and len(v.strip()) >= 3:
            s = v.strip().lower()
            out.append(normal_url(s) if _is_identifier(s) and "." in s else s)
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


class PendingResult:
    """A finished step's result not read into tokens yet: what reading it takes (its raw arguments
    and result, shared with its span), not the step, which holds its span's attributes and events."""

    __slots__ = ("arguments", "result", "span_id", "tool")

    def __init__(self, tool: str, span_id: int, arguments: Any, result: Any) -> None:
        self.tool = tool
        self.span_id = span_id
        self.arguments = arguments
        self.result = result


class Provenance:
    """The tokens of one run's (or conversation's) tool results, bounded in bytes; trims counted."""

    __slots__ = ("counted", "cursor", "max_bytes", "pending", "pending_bytes", "shadowed", "size", "tokens",
                 "trimmed")

    def __init__(self, max_bytes: int) -> None:
        self.tokens: dict[int, Source] = {}  # first untrusted source of a token; a trusted one overrides
        self.max_bytes = max_bytes
        self.size = 0
        self.trimmed = 0  # tokens not kept: the bound was reached
        self.cursor = 0  # steps of the run read so far
        self.pending: list[PendingResult] = []  # finished turns' results, read on first need
        self.pending_bytes = 0  # their length, bounded by ``max_bytes`` (past it they are read at once)
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
