"""Per-argument normalisers: the forms of a value that should compare equal.

A normaliser is named in the cases file, optionally with a parameter after a colon
(``decimal:2``, ``date:dmy``, ``regex:ORD-(\\d+)``). It is applied to the expected value and to
the value the agent passed, and the two results are compared. ``ignore`` accepts any value
(or none). Normalisers compose left to right: ``[whitespace, case]``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from .patterns import compile_pattern

Normaliser = Callable[[Any], Any]

IGNORE = "ignore"


class _Unparsed:
    """A value a normaliser could not read: equal only to the same raw value."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unparsed) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(repr(self.raw))

    def __repr__(self) -> str:
        return f"unparsed({self.raw!r})"


def _case(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


_SPACES = re.compile(r"\s+")


def _whitespace(value: Any) -> Any:
    return _SPACES.sub(" ", value).strip() if isinstance(value, str) else value


_NUMBER_JUNK = re.compile(r"[\s,_]")
_CURRENCY = re.compile(r"^[$€£¥]|[$€£¥]$|^(usd|eur|gbp)\s*|\s*(usd|eur|gbp)$", re.IGNORECASE)


def _number(value: Any) -> Any:
    """Numeric value: ``42``, ``42.0``, ``"42"`` and ``"1,000"`` vs ``1000`` compare equal."""
    if isinstance(value, bool):
        return _Unparsed(value)
    if isinstance(value, (int, float)):
        f = float(value)
    elif isinstance(value, str):
        try:
            f = float(_NUMBER_JUNK.sub("", value))
        except ValueError:
            return _Unparsed(value)
    else:
        return _Unparsed(value)
    if math.isnan(f):
        return _Unparsed(value)
    return round(f, 9)


def _decimal(places: str | None) -> Normaliser:
    """Exact decimal value, currency signs and thousands separators dropped; ``decimal:2`` rounds."""
    quantum = Decimal(1).scaleb(-int(places)) if places else None

    def normalise(value: Any) -> Any:
        if isinstance(value, bool):
            return _Unparsed(value)
        text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
        text = _NUMBER_JUNK.sub("", _CURRENCY.sub("", text.strip()))
        try:
            d = Decimal(text)
        except InvalidOperation:
            return _Unparsed(value)
        if not d.is_finite():
            return _Unparsed(value)
        if quantum is not None:
            d = d.quantize(quantum)
        return d.normalize()

    return normalise


_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
_ISO = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[t ].*)?$")
_COMPACT = re.compile(r"^(\d{4})(\d{2})(\d{2})$")
_NUMERIC = re.compile(r"^(\d{1,4})[/.\-](\d{1,2})[/.\-](\d{1,4})$")
_WORDY = re.compile(r"^(?:[a-z]+,?\s+)?(?:(\d{1,2})(?:st|nd|rd|th)?\s+([a-z]+)\.?|([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?),?\s+(\d{4})$")


def _month(word: str) -> int | None:
    return _MONTHS.get(word[:3]) if len(word) >= 3 else None


def _date(order: str | None) -> Normaliser:
    """A calendar date from ISO, compact, slashed and written forms.

    ``date`` reads ``03/05/2024`` month first (``date:mdy``); ``date:dmy`` reads it day first.
    A datetime keeps its date part only.
    """
    day_first = (order or "mdy") == "dmy"
    if order not in (None, "mdy", "dmy"):
        raise ValueError(f"date order must be mdy or dmy, got {order!r}")

    def parse(text: str) -> dt.date | None:
        t = text.strip().lower()
        m = _ISO.match(t) or _COMPACT.match(t)
        if m:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        m = _NUMERIC.match(t)
        if m:
            a, b, c = m[1], m[2], m[3]
            if len(a) == 4:
                return dt.date(int(a), int(b), int(c))
            year = int(c) + (2000 if len(c) == 2 else 0)
            first, second = int(a), int(b)
            if first > 12 or (day_first and second <= 12):
                return dt.date(year, second, first)
            return dt.date(year, first, second)
        m = _WORDY.match(t)
        if m:
            day, word = (m[1], m[2]) if m[1] else (m[4], m[3])
            month = _month(word)
            if month is not None:
                return dt.date(int(m[5]), month, int(day))
        return None

    def normalise(value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return value.date()
        if isinstance(value, dt.date):
            return value
        if not isinstance(value, str):
            return _Unparsed(value)
        try:
            d = parse(value)
        except ValueError:  # 2024-02-31
            d = None
        return d if d is not None else _Unparsed(value)

    return normalise


_ID_PREFIX = re.compile(r"^[#\s]*(?:[a-z]+[\s\-_#:./]*)?#?\s*(?=[0-9])", re.IGNORECASE)


def _id(value: Any) -> Any:
    """The significant part of an identifier: ``ORD-88120``, ``#88120``, ``88120`` all give ``88120``.

    A leading alphabetic prefix before the digits is dropped, then leading zeros; case is folded.
    """
    if isinstance(value, bool):
        return _Unparsed(value)
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        return _Unparsed(value)
    text = _ID_PREFIX.sub("", value.strip())
    text = text.lstrip("0") or ("0" if text else "")
    return text.casefold()


def _regex(pattern: str | None) -> Normaliser:
    """The first group (or the whole match) of a pattern; no match leaves the value as it is."""
    if not pattern:
        raise ValueError("regex needs a pattern: regex:ORD-(\\d+)")
    rx = compile_pattern(pattern)  # safe by construction (RE2), searched on a bounded head

    def normalise(value: Any) -> Any:
        text = value if isinstance(value, str) else str(value)
        m = rx.search(text)
        if m is None:
            return value
        return m.group(1) if rx.groups else m.group(0)

    return normalise


_SIMPLE: dict[str, Normaliser] = {"case": _case, "whitespace": _whitespace, "number": _number, "id": _id}
_PARAMETRISED: dict[str, Callable[[str | None], Normaliser]] = {
    "decimal": _decimal, "date": _date, "regex": _regex,
}
NAMES = (*_SIMPLE, *_PARAMETRISED, IGNORE)


# Other names for the same normalisers (the policy file accepts them too).
ALIASES = {"lower": "case", "strip": "whitespace", "int": "number", "id-pattern": "regex", "id_pattern": "regex"}


def build(spec: str) -> Normaliser | None:
    """A normaliser from its name (``None`` for ``ignore``); ``ValueError`` names what is wrong."""
    name, _, param = spec.partition(":")
    name = name.strip()
    name = ALIASES.get(name, name)
    if name == IGNORE:
        return None
    if name in _SIMPLE:
        if param:
            raise ValueError(f"normaliser {name!r} takes no parameter")
        return _SIMPLE[name]
    if name in _PARAMETRISED:
        if name == "decimal" and param and not param.isdigit():
            raise ValueError(f"decimal places must be a whole number, got {param!r}")
        return _PARAMETRISED[name](param or None)
    raise ValueError(f"unknown normaliser {name!r} (one of: {', '.join(NAMES)})")


class ArgumentRule:
    """How one expected argument is compared: its normalisers, or ``ignore``."""

    __slots__ = ("ignore", "specs", "steps")

    def __init__(self, specs: Sequence[str] = ()) -> None:
        self.specs = tuple(specs)
        built = [build(s) for s in self.specs]
        self.ignore = any(b is None for b in built)
        self.steps = tuple(b for b in built if b is not None)

    def apply(self, value: Any) -> Any:
        for step in self.steps:
            value = step(value)
        return _strip(value) if not self.steps else value

    def matches(self, expected: Any, actual: Any) -> bool:
        if self.ignore:
            return True
        return bool(self.apply(expected) == self.apply(actual))


def _strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


PLAIN = ArgumentRule()
