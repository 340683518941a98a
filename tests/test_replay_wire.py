"""The wire readers (``replay/formats/wire.py`` and its C twin ``replay/formats/_wire_c.c``) read every request as
protobuf + ``request_spans`` does; every test here runs with each.

Requests are built with protobuf's own classes (every field the proto defines, every value type,
unknown fields, fields given twice) and with the SDK's OTLP encoder from real spans; each is read
both ways. The wire reader may give up (None: protobuf reads it), never give other spans, and
never accept bytes protobuf refuses: checked on thousands of seeded corruptions of real requests.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import trace_files as tf
from conftest import ISSUE_POLICY
from google.protobuf.message import DecodeError
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from test_readers import fields

from otel_agenteval.receiver.decoding import from_protobuf
from otel_agenteval.replay.formats.native import native_spans
from otel_agenteval.replay.formats.protobuf import request_spans
from otel_agenteval.replay.formats.wire import wire_spans

Reader = Callable[[bytes], Any]
READERS: dict[str, Reader | None] = {"wire.py": wire_spans, "_wire_c": native_spans}


@pytest.fixture(params=sorted(READERS))
def read(request: pytest.FixtureRequest) -> Reader:
    reader = READERS[request.param]
    if reader is None:
        pytest.skip("the C wire reader is built with the compiled build only")
    return reader

_T, _S, _P = bytes.fromhex("0af7651916cd43dd8448eb211c80319c"), bytes.fromhex("b7ad6b7169203331"), bytes(range(1, 9))


def reference(data: bytes) -> list[dict[str, Any]] | str:
    """What protobuf + ``request_spans`` read: the spans' fields, or the rejections / parse error."""
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(data)
    except DecodeError:
        return "DecodeError"
    rejects: list[str] = []
    out = [fields(s) for s in request_spans(req, "r", rejects.append)]
    return "; ".join(rejects) if rejects else out


def wire(data: bytes, read: Reader) -> list[dict[str, Any]] | None:
    got = read(data)
    return None if got is None else [fields(s) for s in got]


def _value(v: AnyValue, x: Any) -> None:
    if isinstance(x, bool):
        v.bool_value = x
    elif isinstance(x, int):
        v.int_value = x
    elif isinstance(x, float):
        v.double_value = x
    elif isinstance(x, bytes):
        v.bytes_value = x
    elif isinstance(x, tuple):
        v.array_value.SetInParent()
        for y in x:
            _value(v.array_value.values.add(), y)
    elif isinstance(x, dict):
        v.kvlist_value.SetInParent()
        for k, y in x.items():
            _value(v.kvlist_value.values.add(key=k).value, y)
    elif x is not None:
        v.string_value = x


def request(n_spans: int = 2, **kw: Any) -> ExportTraceServiceRequest:
    """Two resources, scopes and spans with every field the proto has, ``kw`` setting span fields."""
    req = ExportTraceServiceRequest()
    values = {"s": "v", "empty": "", "i": -3, "big": 2**63 - 1, "f": 1.5, "t": True, "no": False, "b": b"\x00\xff",
              "list": ("a", 1, 2.5, False, ("n",)), "kv": {"a": "x", "d": {"e": (1,)}}, "unset": None, "é": "ü✓"}
    for r in range(2):
        rs = req.resource_spans.add(schema_url="u")
        rs.resource.attributes.add(key="service.name").value.string_value = f"svc{r}"
        rs.resource.dropped_attributes_count = 1
        ss = rs.scope_spans.add(schema_url="u")
        ss.scope.name, ss.scope.version = "scope", "1"
        for k in range(n_spans):
            s = ss.spans.add(trace_id=_T, span_id=bytes([r, k + 1]) + _S[2:], parent_span_id=_P, flags=0x100,
                             name=f"span {k}", kind=k % 6, start_time_unix_nano=10 + k, end_time_unix_nano=100 - k,
                             trace_state="a=b", dropped_attributes_count=2, dropped_events_count=1,
                             dropped_links_count=1)
            for key, x in values.items():
                _value(s.attributes.add(key=key).value, x)
            ev = s.events.add(name="exception", time_unix_nano=50, dropped_attributes_count=1)
            ev.attributes.add(key="exception.type").value.string_value = "ValueError"
            s.links.add(trace_id=_T, span_id=_P).attributes.add(key="l").value.int_value = 1
            s.status.code, s.status.message = (k % 3, "failed" if k % 3 == 2 else "")
            for field, x in kw.items():
                if field == "status":
                    s.status.code, s.status.message = x
                elif field == "no_status":
                    s.ClearField("status")
                else:
                    setattr(s, field, x)
    return req


def test_every_field_and_value_type_reads_as_the_reference(read: Reader) -> None:
    data = request().SerializeToString()
    got = wire(data, read)
    assert got is not None and got == reference(data)
    assert got[0]["attributes"]["list"] == ("a", 1, 2.5, False, ("n",)) and got[0]["attributes"]["unset"] is None


def test_real_sdk_requests_read_as_the_reference(make_processor: Any, read: Reader) -> None:
    spans = tf.recorded(make_processor, ISSUE_POLICY)[1]
    for k in (1, 3, len(spans)):
        data = encode_spans(spans[:k]).SerializeToString()
        got = wire(data, read)
        assert got is not None and got == reference(data)
        assert [s.attributes for s in from_protobuf(data).spans] == [dict(s["attributes"]) for s in got]


_ODD = {
    "no parent": {"parent_span_id": b""}, "remote parent": {"flags": 0x300}, "no status": {"no_status": True},
    "unset status with message": {"status": (0, "m")}, "bad status": {"status": (9, "")}, "bad kind": {"kind": 9},
    "short trace id": {"trace_id": b"\x01" * 15}, "zero span id": {"span_id": bytes(8)},
    "short parent": {"parent_span_id": b"\x01"}, "zero trace id": {"trace_id": bytes(16)},
    "empty name": {"name": ""},
}


@pytest.mark.parametrize("case", sorted(_ODD))
def test_odd_spans_read_as_the_reference_or_go_to_it(case: str, read: Reader) -> None:
    data = request(**_ODD[case]).SerializeToString()
    got, expected = wire(data, read), reference(data)
    assert got is None or got == expected
    if case in ("no parent", "remote parent", "no status", "unset status with message", "empty name"):
        assert got is not None  # usual forms: read from the wire
    else:
        assert got is None and isinstance(expected, str)  # protobuf's path names the bad span


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    tag = bytes([number << 3 | wire_type]) if number < 16 else bytes([(number << 3 | wire_type) & 0x7F | 0x80,
                                                                      number >> 4])
    if wire_type == 2:
        return tag + _len(len(payload)) + payload
    return tag + payload


def _len(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _wrap(span: bytes) -> bytes:
    return _field(1, 2, _field(2, 2, _field(2, 2, span)))


_IDS = _field(1, 2, _T) + _field(2, 2, _S)
_HAND = {  # bytes no encoder writes, all legal protobuf
    "unknown fields": _IDS + _field(99, 0, b"\x05") + _field(98, 5, b"1234") + _field(97, 1, b"12345678")
    + _field(96, 2, b"xyz"),
    "name twice (last wins)": _IDS + _field(5, 2, b"a") + _field(5, 2, b"b"),
    "status twice (merged)": _IDS + _field(15, 2, _field(3, 0, b"\x02")) + _field(15, 2, _field(2, 2, b"m")),
    "value twice (merged)": _IDS + _field(9, 2, _field(1, 2, b"k") + _field(2, 2, _field(1, 2, b"a"))
                                          + _field(2, 2, _field(3, 0, b"\x01"))),
    "two value kinds (last wins)": _IDS + _field(9, 2, _field(1, 2, b"k") + _field(2, 2, _field(1, 2, b"a")
                                                                                + _field(3, 0, b"\x07"))),
    "name as a varint": _IDS + _field(5, 0, b"\x01"),
    "negative kind": _IDS + _field(6, 0, b"\xff" * 9 + b"\x01"),
    "string index value": _IDS + _field(9, 2, _field(1, 2, b"k") + _field(2, 2, _field(8, 0, b"\x01"))),
    "bad utf-8": _IDS + _field(5, 2, b"\xff\xfe"),
    "a group": _IDS + bytes([0x9B, 0x06]) + bytes([0x9C, 0x06]),
    "flags": _IDS + _field(4, 2, _P) + _field(16, 5, (0x300).to_bytes(4, "little")),
    "resource after its spans": _field(1, 2, _field(2, 2, _field(2, 2, _IDS))
                                       + _field(1, 2, _field(1, 2, _field(1, 2, b"r") + _field(2, 2, b"")))),
}


@pytest.mark.parametrize("case", sorted(_HAND))
def test_hand_made_wire_forms(case: str, read: Reader) -> None:
    data = _HAND[case] if case.startswith("resource") else _wrap(_HAND[case])
    got, expected = wire(data, read), reference(data)
    assert got is None or got == expected, (got, expected)
    if case in ("unknown fields", "name twice (last wins)", "flags", "resource after its spans"):
        assert got is not None


def test_corrupted_requests_are_never_read_otherwise(make_processor: Any, read: Reader) -> None:
    """Seeded flips, insertions and cuts of real requests: the wire reader gives protobuf's spans
    or gives up; bytes protobuf refuses are never read."""
    spans = tf.recorded(make_processor, ISSUE_POLICY)[1]
    seeds = [encode_spans(spans[:4]).SerializeToString(), request(1).SerializeToString()]
    rng = random.Random(11)
    got_read = refused = 0
    for n in range(3000):
        data = bytearray(seeds[n % 2])
        for _ in range(rng.randint(1, 3)):
            op, at = rng.random(), rng.randrange(len(data))
            if op < 0.6:
                data[at] = rng.randrange(256)
            elif op < 0.8:
                data.insert(at, rng.randrange(256))
            else:
                del data[at:at + rng.randint(1, 8)]
        got, expected = wire(bytes(data), read), reference(bytes(data))
        if got is not None:
            got_read += 1
            assert got == expected, bytes(data).hex()
        elif expected == "DecodeError":
            refused += 1
    assert got_read > 300 and refused > 300  # both sides of the line were exercised


def test_values_nested_deeper_than_the_readers_go_are_left_to_protobuf(read: Reader) -> None:
    for depth, read_here in ((15, True), (17, False)):
        req = request(1)
        v = req.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="deep").value
        for _ in range(depth):
            v = v.array_value.values.add()
        v.string_value = "bottom"
        data = req.SerializeToString()
        got = wire(data, read)
        assert (got is not None) == read_here and (got is None or got == reference(data))


def test_keys_past_the_key_cache_read_the_same(read: Reader) -> None:
    """More distinct keys than either reader keeps (4,096), and keys longer than it keeps (128 bytes)."""
    req = request(1)
    attrs = req.resource_spans[0].scope_spans[0].spans[0].attributes
    for n in range(5000):
        attrs.add(key=f"k{n}" + "x" * (n % 200)).value.int_value = n
    data = req.SerializeToString()
    got = wire(data, read)
    assert got is not None and got == reference(data)
    assert got[0]["attributes"]["k4999" + "x" * 199] == 4999
    assert wire(data, read) == got  # read again: from the cache where the keys were kept


def test_the_readers_take_the_wire_path_on_the_compiled_build() -> None:
    from otel_agenteval.cli.build import compiled_modules
    from otel_agenteval.replay.formats.protobuf import WIRE_SPANS

    compiled = "replay.formats.wire" in compiled_modules()
    assert (WIRE_SPANS is not None) == compiled
    assert (native_spans is not None) == compiled and (not compiled or WIRE_SPANS is native_spans)


def test_values_repeated_across_spans_read_right_and_once_in_c() -> None:
    """The C reader keeps one str for a value it saw last in its slot (agents repeat tool
    definitions on every model call, and a run's names and ids on every span); a value that only
    shares its size and both ends with one is read apart."""
    same = "{" + "tool definition " * 40 + "}"
    twin = same[:100] + "X" + same[101:]  # same size, same first and last 16 bytes
    wide = "ü" * 300  # not ASCII: decoded each time
    short = "support_agent"
    short_twin = "0123456789abcdef-0123456789abcdef"  # 33 bytes: one in the middle is not hashed
    req = request(4)
    for n, s in enumerate(req.resource_spans[0].scope_spans[0].spans):
        s.attributes.add(key="defs").value.string_value = (same, same, twin, same)[n]
        s.attributes.add(key="wide").value.string_value = wide
        s.attributes.add(key="short").value.string_value = (short, short, "ü", short)[n]
        s.attributes.add(key="id").value.string_value = short_twin if n % 2 else short_twin.replace("-", "+")
    data = req.SerializeToString()

    def first_resource(read: Reader) -> list[dict[str, Any]]:
        got = read(data)
        assert got is not None and [fields(s) for s in got] == reference(data)
        by_name = {s.name: s.attributes for s in got if s.resource.attributes["service.name"] == "svc0"}
        return [by_name[f"span {n}"] for n in range(4)]

    for reader in (r for r in READERS.values() if r is not None):
        attrs = first_resource(reader)
        assert [a["defs"] for a in attrs] == [same, same, twin, same] and all(a["wide"] == wide for a in attrs)
        assert [a["short"] for a in attrs] == [short, short, "ü", short]
        assert [a["id"] for a in attrs] == [short_twin.replace("-", "+"), short_twin] * 2
    if native_spans is not None:
        attrs = first_resource(native_spans)
        defs = [a["defs"] for a in attrs]
        assert defs[0] is defs[1] and defs[2] is not defs[0]
        assert attrs[0]["short"] is attrs[1]["short"] is attrs[3]["short"]


def test_a_tag_or_length_protobuf_refuses_is_given_up(read: Reader) -> None:
    """Found by benchmarks/fuzz_wire_c.py: protobuf reads a tag in at most 5 bytes and 32 bits, and
    a length in at most 5 bytes; a field number past 2^29 - 1, or a tag or length padded to 6+
    bytes, was read by both wire readers, where protobuf refuses the body."""
    for found in ("858080808080807f800a8080", "8080b280808080808000808001",  # tags
                  "0a80808080808080808000", "b2768080808080008080800100"):  # lengths of 6+ bytes
        data = bytes.fromhex(found)
        assert reference(data) == "DecodeError" and read(data) is None
    good = request(1).SerializeToString()
    past, largest = bytes.fromhex("8580808010"), bytes.fromhex("fdffffff0f")  # fields 2^29 and 2^29 - 1, fixed32
    assert reference(good + past + b"\0" * 4) == "DecodeError" and read(good + past + b"\0" * 4) is None
    assert wire(good + largest + b"\0" * 4, read) == reference(good + largest + b"\0" * 4) == reference(good)
    assert good[0] == 0x0A  # resource_spans' tag, padded to 5 bytes (protobuf reads it) and to 6 (it refuses)
    five, six = bytes.fromhex("8a80808000") + good[1:], bytes.fromhex("8a8080808000") + good[1:]
    assert wire(five, read) == reference(five) == reference(good)
    assert reference(six) == "DecodeError" and read(six) is None
    def ld(field: int, payload: bytes) -> bytes:  # a length-delimited field (short: one length byte)
        return bytes([field << 3 | 2, len(payload)]) + payload

    for pad, ok in ((5, True), (6, False)):  # a string value's length in 5 bytes, then in 6
        value = b"\x0a" + b"\x83" + b"\x80" * (pad - 2) + b"\x00" + b"abc"
        span = ld(1, _T) + ld(2, _S) + ld(5, b"s") + ld(9, ld(1, b"k") + ld(2, value))
        data = ld(1, ld(2, ld(2, span)))  # resource_spans { scope_spans { spans } }
        assert (reference(data) != "DecodeError") == ok
        assert (wire(data, read) == reference(data)) if ok else read(data) is None


@pytest.mark.parametrize(("choice", "expected"), [
    ("upb", "None"), ("python", "_python_wire_spans"), ("c", "native_spans"), ("uPb", "ValueError")])
def test_the_reader_is_chosen_by_its_environment_variable(choice: str, expected: str) -> None:
    """OTEL_AGENTEVAL_WIRE_READER picks protobuf's reader for an A/B (benchmarks/serve_throughput.py
    --readers); a name it does not know is refused, naming the variable."""
    import os
    import subprocess
    import sys

    if choice == "c" and native_spans is None:
        expected = "ValueError"  # the plain build has no C reader to pick
    code = ("from otel_agenteval.replay.formats import protobuf as p\n"
            "print(getattr(p.WIRE_SPANS, '__name__', p.WIRE_SPANS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OTEL_AGENTEVAL_WIRE_READER": choice})
    if expected == "ValueError":
        assert out.returncode != 0 and f"OTEL_AGENTEVAL_WIRE_READER={choice!r}" in out.stderr
    else:
        assert out.returncode == 0 and out.stdout.strip() == expected, out.stderr
