"""One JSON record -> :class:`RecordedSpan` list: an OTLP/JSON request or the SDK's ``to_json``.

Pure functions over values ``orjson``/``json`` returned; file handling is in :mod:`.readers`,
protobuf in :mod:`.wire` and :mod:`.protobuf`. The readers: OTLP/JSON as parsed dicts
(:mod:`.otlp_json`, the reference, which names what is wrong), OTLP/JSON typed by msgspec
(:mod:`.typed_json`, the fast path, which hands anything unusual back), the SDK's ``to_json``
(:mod:`.sdk_json`); what they share is in :mod:`.values`. A bad span raises :class:`Bad` naming
the field; a bad span inside a request is passed to ``reject`` and the rest is kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..spanview import RecordedSpan
from .otlp_json import otlp_json_request
from .sdk_json import sdk_span
from .values import Bad

try:  # orjson is ~3x faster on these documents; json is the fallback
    import orjson

    _loads: Callable[[bytes | bytearray], Any] = orjson.loads
except ImportError:  # pragma: no cover - exercised only without orjson
    _loads = json.loads


def spans_from_json(value: Any, where: str, reject: Callable[[str], None]) -> list[RecordedSpan]:
    if isinstance(value, list):
        out: list[RecordedSpan] = []
        for i, item in enumerate(value):
            out.extend(spans_from_json(item, f"{where}: item {i}", reject))
        return out
    if not isinstance(value, dict):
        raise Bad(f"expected a JSON object, got {type(value).__name__}")
    if "resourceSpans" in value:
        return otlp_json_request(value, where, reject)
    if "context" in value and "name" in value:
        return [sdk_span(value)]
    if "resource_spans" in value:
        raise Bad("snake_case OTLP JSON (resource_spans) is not supported: OTLP/JSON uses lowerCamelCase")
    if not value:  # {} is an empty request
        return []
    raise Bad(f"neither an OTLP ExportTraceServiceRequest nor an SDK span (keys: {', '.join(sorted(value)[:5])})")


MAX_DEPTH = 1024  # nesting of arrays and objects in one document (orjson's own limit)


class _NotFinite(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _finite(literal: str) -> float:
    f = float(literal)
    if f - f != 0:  # inf or nan
        raise _NotFinite(literal)
    return f


def _constant(literal: str) -> float:  # NaN, Infinity, -Infinity: not JSON
    raise _NotFinite(literal)


def parse(data: bytes | bytearray) -> Any:
    """A JSON document; ``ValueError`` naming what is wrong: not JSON, nested deeper than
    :data:`MAX_DEPTH`, or a number no field can hold (``1e400``, ``NaN``), with its field."""
    try:
        return _loads(data)
    except ValueError as exc:
        if "depth limit" in str(exc):  # orjson: json's recursive scanner would only fail later
            raise ValueError(f"nested too deep: more than {MAX_DEPTH} levels of arrays and objects (depth limit)") from None
    try:  # orjson refuses what json takes (e.g. ints beyond 64 bits)
        return json.loads(data, parse_float=_finite, parse_constant=_constant)
    except _NotFinite as exc:
        raise ValueError(f"{_field_of(data, exc.literal)}{exc.literal} is out of range: not a finite number") from None
    except RecursionError:
        raise ValueError(f"nested too deep for the JSON reader (depth limit {MAX_DEPTH})") from None


def _field_of(data: bytes | bytearray, literal: str) -> str:
    """``"name: "`` of the first member whose value is ``literal``, for the error message."""
    import re

    m = re.search(rb'"([^"\\]{1,100})"\s*:\s*' + re.escape(literal.encode()) + rb"(?![0-9.eE])", data)
    return f"{m.group(1).decode('utf-8', 'replace')}: " if m else ""


