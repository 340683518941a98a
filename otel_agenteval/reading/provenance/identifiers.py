"""The typed identifiers in some text (IBANs, e-mail addresses, URLs, phone numbers), normalised by
type: what :mod:`.tokens` keeps as tokens and a sink value is looked up by.

Tool results are content an attacker may write: a text's head (:data:`~...model.patterns.MAX_TEXT`)
is read, and past :data:`SHORT_TEXT` characters in linear time (RE2, as the policy's patterns).
"""

from __future__ import annotations

import re
from typing import Any, Final

from ...model.patterns import MAX_TEXT, RE2


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
# 10 characters, or 8 after a +, as ``identifiers`` keeps no shorter one): text without any skips the
# long pattern. The dot and @ are looked for first, and every other one holds a digit: text with none
# of the three is decided without a pattern (see may_hold_identifier)
_MAYBE_IDENT: Final = re.compile(r"[A-Za-z]{2}\d\d|\d[\d ().-]{8,}\d|\+\(?\d[\d ().-]{6,}\d")  # no IGNORECASE: faster
_DIGIT: Final = re.compile(r"\d")
_SCHEME: Final = re.compile(r"^[a-z][a-z0-9+.-]*://")


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


def may_hold_identifier(text: str) -> bool:
    """A cheap test: ``False`` means :func:`identifiers` finds nothing in ``text``."""
    if "." in text or "@" in text:
        return True
    return _DIGIT.search(text) is not None and _MAYBE_IDENT.search(text) is not None


def value_may_hold_identifier(value: str) -> bool:
    """A looser test than :func:`may_hold_identifier`, with no pattern, for a short text (a call's
    argument value): ``False`` still means :func:`identifiers` finds nothing. Every identifier holds
    a dot or @, or a digit and either an ASCII letter in four characters or more (an IBAN's country
    and check digits) or nine characters (a phone: ten, or nine with its +)."""
    if "." in value or "@" in value:
        return True
    n = len(value)
    if n < 4:
        return False
    digit = letter = False
    for i in range(n):
        c = ord(value[i])  # compiled: the code point read in place, no one-character string made
        if ord("0") <= c <= ord("9") or c > 127 and value[i].isdecimal():
            digit = True
        elif ord("a") <= c <= ord("z") or ord("A") <= c <= ord("Z"):
            letter = True
    return digit and (letter or n >= 9)


def identifiers(text: str) -> list[tuple[str, str]]:
    """The typed identifiers in ``text`` (its head: :data:`~...model.patterns.MAX_TEXT` characters):
    ``(kind, normalised value)``, URLs also by their host."""
    out: list[tuple[str, str]] = []
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT]
    if not may_hold_identifier(text):
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


def is_identifier(s: str) -> bool:
    """Whether ``s`` is one identifier, whole."""
    return (_IDENT if len(s) <= SHORT_TEXT or _LINEAR is None else _LINEAR).fullmatch(s) is not None
