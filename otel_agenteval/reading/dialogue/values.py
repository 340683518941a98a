"""A write's key values, and whether a turn of the dialogue shows them.

Key values: the argument paths the policy names (``confirmation: {shows: [reservation_id,
payment_methods.amount]}``; a dotted path walks into objects and lists), or, with none named,
the leaves whose type says they matter to the user: identifiers, money, dates, e-mail addresses,
IBANs. Never every argument: free text, flags and counts are not inferred.

Shown: compared after normalisation, so ``1047``, ``$1,047.00`` and ``1 047 €`` are one amount,
``2024-05-20`` and ``May 20th`` one date, ``FQ8APE`` and ``fq8ape`` one id; a list is shown when
each of its members is, in any order.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from ...model.normalise import build

KeyValue = tuple[str, Any]  # (path, value)

_MONEY_NAMES = re.compile(r"(amount|price|total|cost|fee|refund|balance|sum|charge|payment_amount)$")
_ID_NAMES = re.compile(r"(^id$|_id$|Id$|_number$|_code$|^iban$|_iban$)")
_ID_VALUE = re.compile(r"^(?=[A-Za-z0-9_\-#./]*\d)(?=[A-Za-z0-9_\-#./]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9_\-#./]{3,}$|^\d{4,}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", re.IGNORECASE)
_IBAN = re.compile(r"^[A-Z]{2}\d{2}[A-Z0-9 ]{10,30}$")
_DATE_VALUE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_parse_date = build("date")


def _leaves(value: Any, path: str, in_list: bool = False) -> Iterator[tuple[str, Any, bool]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k), in_list)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, path, in_list or isinstance(v, dict))
    else:
        yield path, value, in_list


def _at(value: Any, parts: Sequence[str]) -> Iterator[Any]:
    if not parts:
        if isinstance(value, list):
            for v in value:
                yield from _at(v, parts)
        else:
            yield value
        return
    if isinstance(value, list):
        for v in value:
            yield from _at(v, parts)
    elif isinstance(value, dict) and parts[0] in value:
        yield from _at(value[parts[0]], parts[1:])


def _matters(path: str, value: Any, in_list: bool) -> bool:
    """Inferred by type: an id, money, a date, an e-mail address or an IBAN. In the items of a
    list of objects (an itinerary, passengers, a payment split) only money counts: the rest
    (a kept flight, a birth date, a card's handle) is detail an agent does not restate."""
    if value is None or isinstance(value, bool):
        return False
    name = path.rsplit(".", 1)[-1]
    if in_list:
        return bool(_MONEY_NAMES.search(name.lower())) and _decimal(str(value)) is not None
    if isinstance(value, (int, float)):
        return bool(_MONEY_NAMES.search(name.lower()) or _ID_NAMES.search(name))
    if not isinstance(value, str):
        return False
    v = value.strip()
    return bool(_ID_NAMES.search(name) or _MONEY_NAMES.search(name.lower()) or _ID_VALUE.match(v)
                or _EMAIL.match(v) or _IBAN.match(v.upper()) or _DATE_VALUE.match(v))


_TOKEN_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-#./]{3,}$")


def is_identifier(value: Any) -> bool:
    """A string that reads as an identifier (one token of four or more letters and digits): not
    money, not a date, not prose."""
    if not isinstance(value, str):
        return False
    v = value.strip()
    return bool(_TOKEN_VALUE.match(v)) and not _DATE_VALUE.match(v) and _decimal(v) is None


_HANDLE = re.compile(r"^[a-z]+(?:_[a-z]+)*_\d{4,}$", re.IGNORECASE)


def looks_like_handle(value: Any) -> bool:
    """Named like an internal handle (``credit_card_4421486``, ``gift_card_0001``): words, then a
    number; what a user hears instead is "the card ending in 7447"."""
    return isinstance(value, str) and _HANDLE.match(value) is not None


def key_values(arguments: dict[str, Any], shows: Sequence[str] | None) -> list[KeyValue]:
    """The values a proposal must show for this call: the named paths, or those inferred by type."""
    if shows is None:
        return [(p, v) for p, v, in_list in _leaves(arguments, "") if _matters(p, v, in_list)]
    out: list[KeyValue] = []
    for path in shows:
        out += [(path, v) for v in _at(arguments, path.split(".")) if v is not None]
    return out


def names_action(words: Sequence[str] | None, text: Text) -> bool:
    """Whether the text has a word starting with one of ``words`` (the policy's ``says``; none
    named: any text does)."""
    return not words or any(re.search(rf"(?<![0-9a-z]){re.escape(w.casefold())}", text.flat) for w in words)


class Text:
    """A turn's text, read once for every kind of value: words, numbers, dates."""

    __slots__ = ("_compact", "_dates", "_joined", "_numbers", "flat")

    def __init__(self, text: str) -> None:
        self.flat = " " + " ".join(text.casefold().split()) + " "
        self._joined: str | None = None
        self._compact: set[str] | None = None
        self._numbers: set[Decimal] | None = None
        self._dates: list[tuple[int | None, int, int]] | None = None

    def compact(self) -> set[str]:
        """Its tokens with separators dropped: ``fq-8ape`` reads ``fq8ape``."""
        if self._compact is None:
            self._compact = {t.translate(_TOKEN_SEPARATORS) for t in set(_TOKEN.findall(self.flat))}
        return self._compact

    def has_compact(self, short: str) -> bool:
        """Whether ``short`` is one of its compact tokens. A token's compact form is part of the
        whole text with separators dropped: that cheap look rules most texts out first."""
        if self._joined is None:
            self._joined = _SEPARATORS.sub("", self.flat)
        return short in self._joined and short in self.compact()

    def numbers(self) -> set[Decimal]:
        if self._numbers is None:
            self._numbers = set(_numbers_in(self.flat))
        return self._numbers

    def dates(self) -> list[tuple[int | None, int, int]]:
        if self._dates is None:
            self._dates = list(_dates_in(self.flat))
        return self._dates


_TOKEN = re.compile(r"[0-9a-z@][0-9a-z@_\-#./]*[0-9a-z]|[0-9a-z]")
_TOKEN_SEPARATORS = str.maketrans("", "", "_-#./")  # what _compact drops from a token (only these can be in one)
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:[ ,.\u202f']\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?)(?![\d])")
_WORD = re.compile(r"[a-z]+")
_WORDS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"])}
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
_MONTH_DAY = re.compile(r"\b([a-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?\b")
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]{3,9})\.?(?:,?\s+(\d{4}))?\b")
_NUMERIC_DATE = re.compile(r"\b(\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4})\b")


_SEPARATORS = re.compile(r"[^0-9a-z@]")
_DOTTED_THOUSANDS = re.compile(r"\d{1,3}(\.\d{3})+(,\d{1,2})?")
_DECIMAL_COMMA = re.compile(r"\d+,\d{1,2}")
_CURRENCY = re.compile(r"^[$€£¥]|\s*(usd|eur|gbp|[$€£¥])$")
_MONEY_TEXT = re.compile(r"[$€£¥]?[\d ,.]+(\s*(usd|eur|gbp|[$€£¥]))?")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def _compact(token: str) -> str:
    return _SEPARATORS.sub("", token)


def _decimal(text: str) -> Decimal | None:
    t = text.replace("\u202f", "").replace("'", "").replace(" ", "")
    if not t or not t[0].isdigit() and t[0] not in "-+.":
        return None
    if _DOTTED_THOUSANDS.fullmatch(t):  # 1.047,50
        t = t.replace(".", "").replace(",", ".")
    elif _DECIMAL_COMMA.fullmatch(t):  # 12,50
        t = t.replace(",", ".")
    else:
        t = t.replace(",", "")
    try:
        return Decimal(t)
    except InvalidOperation:
        return None


def _numbers_in(flat: str) -> Iterator[Decimal]:
    for m in _NUMBER.finditer(flat):
        d = _decimal(m[1])
        if d is not None:
            yield d
    for w in _WORD.findall(flat):
        if w in _WORDS:
            yield Decimal(_WORDS[w])


def _dates_in(flat: str) -> Iterator[tuple[int | None, int, int]]:
    found = [(m[1], m[2], m[3]) for m in _MONTH_DAY.finditer(flat)]
    found += [(m[2], m[1], m[3]) for m in _DAY_MONTH.finditer(flat)]
    for word, day, year in found:
        month = _MONTHS.get(word[:3])
        if month is not None and 1 <= int(day) <= 31:
            yield (int(year) if year else None, month, int(day))
    for m in _NUMERIC_DATE.finditer(flat):
        d = _parse_date(m[1]) if _parse_date is not None else None
        if isinstance(d, dt.date):
            yield (d.year, d.month, d.day)


def shows(value: Any, text: Text) -> bool:
    """Whether the text shows ``value``, after normalisation."""
    if isinstance(value, list):
        return all(shows(v, text) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        return True
    if isinstance(value, (int, float, Decimal)):
        try:
            return Decimal(str(value)) in text.numbers()
        except InvalidOperation:
            return False
    raw = str(value).strip()
    if _DATE_VALUE.match(raw) and _parse_date is not None:
        d = _parse_date(raw)
        if isinstance(d, dt.date):
            return any(m == d.month and day == d.day and y in (None, d.year) for y, m, day in text.dates())
    low = raw.casefold()
    if _MONEY_TEXT.fullmatch(low):
        money = _decimal(_CURRENCY.sub("", low))
        if money is not None:
            return money in text.numbers()
    needle = " ".join(low.split())
    if needle and _bounded(needle, text.flat):
        return True
    short = _compact(needle)
    return bool(short) and text.has_compact(short)


def _bounded(needle: str, flat: str) -> bool:
    """``needle`` in ``flat`` as whole words (no letter or digit glued on either side)."""
    at = flat.find(needle)
    while at >= 0:
        end = at + len(needle)
        if (at == 0 or flat[at - 1] not in _ALNUM) and (end >= len(flat) or flat[end] not in _ALNUM):
            return True
        at = flat.find(needle, at + 1)
    return False
