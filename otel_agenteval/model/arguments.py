"""Tool arguments: parsed, normalised and keyed, so equal calls compare equal.

JSON object strings are parsed (orjson first, the standard scanner for what it refuses or may
read inexactly), strings stripped, nesting walked to a bounded depth, and a call's canonical
key bounded in length (hashed past it): whatever a span carries, nothing here recurses without
bound or keeps an unbounded key.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from orjson import OPT_SORT_KEYS as _SORTED
from orjson import JSONDecodeError as _OrjsonError
from orjson import dumps as _orjson_dumps
from orjson import loads as _orjson_loads

MAX_DEPTH = 64  # nesting of argument values walked; deeper values are compared as they are
MAX_KEY_LEN = 512  # a canonical argument text longer than this is kept as its hash


_SCALARS = frozenset((int, float, bool, type(None)))


def normalise_value(value: Any, depth: int = 0) -> Any:
    """Strip strings, recurse into containers, sort nothing (dict equality ignores order).

    Past :data:`MAX_DEPTH` levels a value is kept as it is: no recursion without bound."""
    if isinstance(value, str):
        return value.strip()
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, dict):  # scalars inline: a call only for nested containers
        return {str(k).strip(): v.strip() if type(v) is str else v if type(v) in _SCALARS
                else normalise_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise_value(v, depth + 1) for v in value]
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN/Infinity: the arguments are compared as text instead


# the C scanner json.loads runs, without its Python layers; standard JSON only (the canonical key
# is written by orjson, which has no NaN: {"a": NaN} must not equal {"a": null})
_scan = json.JSONDecoder(parse_constant=_no_constant).scan_once  # type: ignore[attr-defined]


_BIG = 9.223372036854775e18  # orjson reads an int past 64 bits as a float at least this large


def _has_big_float(value: Any, depth: int = 0) -> bool:
    """Whether a parsed value holds a float of 64-bit-int size or more (orjson's reading of a
    longer int, or a float the text wrote so): the standard scanner then reads the text again.
    Too deep to walk: assumed so (the scanner decides)."""
    if type(value) is float:
        return value >= _BIG or value <= -_BIG
    if depth >= MAX_DEPTH:
        return type(value) is dict or type(value) is list
    if type(value) is dict:
        for v in value.values():
            if type(v) is not str and _has_big_float(v, depth + 1):
                return True
    elif type(value) is list:
        for v in value:
            if type(v) is not str and _has_big_float(v, depth + 1):
                return True
    return False


def _loads(text: str) -> Any:
    """``json.loads`` of stripped text (exact for any int), in one C call.

    orjson first (several times quicker on small objects); what it refuses, or reads with a
    float where the text may have a long int, goes to the standard scanner, which decides."""
    try:
        value = _orjson_loads(text)
        if not _has_big_float(value):
            return value
    except _OrjsonError:
        pass
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text):
        raise ValueError("extra data after JSON")
    return value


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments as a dict: JSON object strings parsed, a bare value kept as ``input``.

    LangChain passes a one-argument tool's bare value (``'88120'``) rather than JSON.
    """
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str):  # the usual case: a JSON object as text
        text = raw.strip()
        if text[:1] in ("{", "["):
            try:
                value = _loads(text)
            except (ValueError, RecursionError):  # not JSON, or nested past the scanner's limit
                return {"input": text}
            if isinstance(value, dict):
                return normalise_value(value)  # type: ignore[no-any-return]
            return {"input": normalise_value(value)}
        return {"input": text}
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return normalise_value(raw)  # type: ignore[no-any-return]
    return {"input": raw}


def arguments_key(args: dict[str, Any]) -> str:
    """A canonical text of normalised arguments: equal keys mean equal calls.

    A text longer than :data:`MAX_KEY_LEN` is kept as its hash (``#`` and 32 hex digits): the
    maps of calls seen stay small whatever the arguments."""
    try:
        key = _orjson_dumps(args, default=str, option=_SORTED).decode()
    except TypeError:  # ints past 64 bits (or nesting past orjson's limit): the general encoder
        try:
            key = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
        except (RecursionError, ValueError):
            key = repr(_flat(args))
    if len(key) > MAX_KEY_LEN:
        return "#" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return key


def _flat(value: Any) -> list[Any]:
    """A nested value as a flat list of its scalars and structure marks, without recursion."""
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.append("{")
            stack.extend(v[k] for k in sorted(v, key=str))
            out.extend(sorted(v, key=str))
        elif isinstance(v, (list, tuple)):
            out.append(len(v))
            stack.extend(v)
        else:
            out.append(v)
    return out
