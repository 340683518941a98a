"""Readers: every file format back to the span fields the engine reads, and bad input reported.

Spans come from the real SDK (``trace_files.record_scenario``), are written in each format with
the real encoders (OTLP protobuf, protobuf's JSON mapping, ``span.to_json()``) and read back.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
import trace_files as tf
from conftest import ISSUE_POLICY
from opentelemetry.sdk.trace import ReadableSpan

from otel_agenteval.replay.formats import decode, otlp_json, typed_json, values
from otel_agenteval.replay.readers import InputError, ReadCounts, RejectedInput, iter_spans


def fields(s: Any, us: bool = False) -> dict[str, Any]:
    """The ReadableSpan fields the engine and extract read, as plain values."""
    t = (lambda n: n // 1000) if us else (lambda n: n)
    return {
        "name": s.name, "trace_id": s.context.trace_id, "span_id": s.context.span_id,
        "parent": None if s.parent is None else (s.parent.span_id, s.parent.is_remote),
        "kind": s.kind, "start": t(s.start_time), "end": t(s.end_time),
        "status": (s.status.status_code, s.status.description), "attributes": dict(s.attributes),
        "events": [(e.name, dict(e.attributes), t(e.timestamp)) for e in s.events],
        "resource": dict(s.resource.attributes),
    }


@pytest.fixture
def spans(make_processor: Any) -> list[ReadableSpan]:
    return tf.recorded(make_processor, ISSUE_POLICY)[1]


def read(*paths: Path, **kw: Any) -> tuple[list[Any], ReadCounts, list[str]]:
    counts, rejects = ReadCounts(), []
    got = list(iter_spans(paths, counts=counts, on_reject=rejects.append, **kw))
    return got, counts, rejects


@pytest.mark.parametrize("fmt", sorted(tf.WRITERS))
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_every_format_reads_back_the_span_fields(fmt: str, gz: bool, spans: list[ReadableSpan],
                                                 tmp_path: Path) -> None:
    write, ext = tf.WRITERS[fmt]
    path = write(spans, tmp_path / f"traces{ext}{'.gz' if gz else ''}")
    got, counts, rejects = read(path)
    sdk = fmt.startswith("sdk-")
    expected = [fields(s, us=sdk) for s in spans]
    if sdk:  # to_json writes no is_remote: only server/consumer spans count as entries
        for e, s in zip(expected, spans):
            if e["parent"] is not None:
                e["parent"] = (e["parent"][0], s.kind.name in ("SERVER", "CONSUMER"))
    assert [fields(s, us=sdk) for s in got] == expected
    assert rejects == [] and counts.spans == len(spans) and counts.rejected == 0 and counts.files == 1


def test_the_scenario_has_every_value_type(spans: list[ReadableSpan]) -> None:
    tool = next(s for s in spans if s.attributes.get("x.int") == 3)
    assert {k: tool.attributes[k] for k in ("x.list", "x.ints", "x.float", "x.bool")} == {
        "x.list": ("a", "b"), "x.ints": (1, 2), "x.float": 1.5, "x.bool": True}
    assert any(s.parent is not None and s.parent.is_remote for s in spans)
    assert any(s.events for s in spans)


def test_format_is_told_by_content_not_name(spans: list[ReadableSpan], tmp_path: Path) -> None:
    a = tf.otlp_protobuf(spans, tmp_path / "a.pb")
    b = tf.otlp_json_lines(spans, tmp_path / "b.jsonl.gz")
    odd_a, odd_b = tmp_path / "traces-1.dat", tmp_path / "traces-2.txt"
    odd_a.write_bytes(a.read_bytes())
    odd_b.write_bytes(b.read_bytes())  # gzip under a .txt name
    got, _counts, rejects = read(odd_a, odd_b)
    assert rejects == [] and [fields(s) for s in got] == [fields(s) for s in spans] * 2


def test_otlp_json_value_forms(tmp_path: Path) -> None:
    """Ints as numbers or strings, enums as numbers or names, kvlist/bytes/empty values, flags."""
    doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
                              "scopeSpans": [{"spans": [{
                                  "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
                                  "parentSpanId": "00f067aa0ba902b7", "flags": 0x300, "name": "x",
                                  "kind": "SPAN_KIND_SERVER", "startTimeUnixNano": 5, "endTimeUnixNano": "9",
                                  "status": {"code": "STATUS_CODE_ERROR", "message": "bad"},
                                  "attributes": [
                                      {"key": "i", "value": {"intValue": 7}},
                                      {"key": "d", "value": {"doubleValue": "NaN"}},
                                      {"key": "kv", "value": {"kvlistValue": {"values": [
                                          {"key": "a", "value": {"boolValue": False}}]}}},
                                      {"key": "b", "value": {"bytesValue": "AAE="}},
                                      {"key": "e", "value": {}}]}]}]}]}
    path = tmp_path / "v.json"
    path.write_text(json.dumps(doc))
    (s,), _, rejects = read(path)
    assert rejects == []
    assert (s.parent.span_id, s.parent.is_remote, s.kind.name, s.start_time, s.end_time) == (
        0x00F067AA0BA902B7, True, "SERVER", 5, 9)
    assert (s.status.status_code.name, s.status.description) == ("ERROR", "bad")
    d = s.attributes.pop("d")
    assert math.isnan(d)
    assert s.attributes == {"i": 7, "kv": {"a": False}, "b": b"\x00\x01", "e": None}
    assert s.resource.attributes == {"service.name": "s"}


def test_bad_lines_and_spans_are_reported_with_line_and_counted(spans: list[ReadableSpan], tmp_path: Path) -> None:
    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["traceId"]
    broken["resourceSpans"][0]["scopeSpans"][0]["spans"][2]["spanId"] = "zz"
    lines[1] = json.dumps(broken)
    lines.insert(3, "not json at all")
    lines.insert(4, '{"metrics": []}')
    lines.insert(5, "")  # a blank line is not an error
    path.write_text("\n".join(lines) + "\n")
    _got, counts, rejects = read(path)
    assert rejects == [
        f"{path}:2: resourceSpans[0].scopeSpans[0].spans[1]: missing traceId",
        f"{path}:2: resourceSpans[0].scopeSpans[0].spans[2]: spanId 'zz' is neither 16 hex digits nor base64 of 8 bytes",
        f"{path}:4: not valid JSON: Expecting value: line 1 column 1 (char 0)",
        f"{path}:5: neither an OTLP ExportTraceServiceRequest nor an SDK span (keys: metrics)",
    ]
    assert (counts.rejected, counts.spans, counts.lines) == (4, len(spans) - 2, len(lines))
    with pytest.raises(RejectedInput, match=r"t\.jsonl:2: .*missing traceId"):
        read(path, strict=True)


def test_bad_records_in_pretty_and_protobuf_files(spans: list[ReadableSpan], tmp_path: Path) -> None:
    objs = tf.sdk_json_objects(spans[:3], tmp_path / "o.json")
    text = objs.read_text().splitlines()
    second = next(i for i, line in enumerate(text) if i and line == "{")
    text[second + 1] = '    "name": oops,'
    objs.write_text("\n".join(text) + "\n")
    got, counts, rejects = read(objs)
    assert len(got) == 2 and len(rejects) == 1 and rejects[0].startswith(f"{objs}:{second + 1}: not valid JSON")

    pb = tf.otlp_protobuf(spans, tmp_path / "t.pb")
    data = pb.read_bytes()
    pb.write_bytes(data[:-10])  # cut inside the last record
    got, counts, rejects = read(pb)
    last = -(-len(spans) // 5)
    assert len(rejects) == 1 and f"record {last} " in rejects[0] and "file ends inside the record" in rejects[0]
    assert counts.spans == len(spans) - (len(spans) - 5 * (last - 1))


def test_truncated_gzip_is_reported_not_fatal(spans: list[ReadableSpan], tmp_path: Path) -> None:
    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl.gz")
    path.write_bytes(path.read_bytes()[:-30])
    _got, counts, rejects = read(path)
    assert len(rejects) == 1 and "read failed" in rejects[0] and counts.rejected == 1


def test_empty_and_blank_files(tmp_path: Path) -> None:
    empty, blank, gz = tmp_path / "e.json", tmp_path / "b.jsonl", tmp_path / "z.json.gz"
    empty.write_bytes(b"")
    blank.write_bytes(b"\n  \n\n")
    gz.write_bytes(gzip.compress(b""))
    got, counts, rejects = read(empty, blank, gz)
    assert (got, rejects, counts.files, counts.spans) == ([], [], 3, 0)


def test_unreadable_files_raise_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing.json: cannot read"):
        read(tmp_path / "missing.json")
    zst = tmp_path / "t.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd0000")
    with pytest.raises(InputError, match="zstd"):
        read(zst)


def test_plain_json_fallback_reads_the_same(spans: list[ReadableSpan], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl")
    with_orjson = [fields(s) for s in read(path)[0]]
    from otel_agenteval.replay import readers

    monkeypatch.setattr(readers, "typed_request", None)  # the dict path, parsed by json
    monkeypatch.setattr(decode, "_loads", json.loads)
    assert [fields(s) for s in read(path)[0]] == with_orjson


def test_spans_of_one_request_come_in_end_order(spans: list[ReadableSpan], tmp_path: Path) -> None:
    """The SDK's encoder groups a batch by scope; replay needs end order back."""
    path = tf.otlp_json_lines(list(reversed(spans)), tmp_path / "r.jsonl", batch=len(spans))
    got = read(path)[0]
    assert [s.end_time for s in got] == sorted(s.end_time for s in spans)


# --- the fast path reads every span exactly as the reference reader does ------------------------
_T, _T2 = "0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736"
_S, _P = "b7ad6b7169203331", "00f067aa0ba902b7"
_SV = {"stringValue": "v"}


def _span(**kw: Any) -> dict[str, Any]:
    s = {"traceId": _T, "spanId": _S, "parentSpanId": _P, "flags": 256, "name": "n", "kind": 1,
         "startTimeUnixNano": "5", "endTimeUnixNano": "9", "attributes": [{"key": "k", "value": _SV}], "status": {}}
    s.update(kw)
    return {k: v for k, v in s.items() if v is not _GONE}


_GONE = object()
_ODD_SPANS = {
    "common": {}, "no parent": {"parentSpanId": _GONE}, "empty parent": {"parentSpanId": ""},
    "no flags": {"flags": _GONE}, "remote parent": {"flags": 0x300}, "remote flag alone": {"flags": 0x200},
    "string flags": {"flags": "768"}, "base64 ids": {"traceId": "CvdlGRbNQ92ESOshHIAxnA==", "spanId": "t61rcWkgMzE=",
                                                    "parentSpanId": "APBnqguqArc="},
    "bad base64": {"spanId": "t61rcWkg"}, "zero trace": {"traceId": "0" * 32}, "zero span": {"spanId": "0" * 16},
    "zero parent": {"parentSpanId": "0" * 16}, "no trace id": {"traceId": _GONE}, "int trace id": {"traceId": 7},
    "short parent": {"parentSpanId": "abc"}, "list parent": {"parentSpanId": ["x"]}, "0x ids": {"spanId": "0x" + "1" * 14},
    "no kind": {"kind": _GONE}, "kind name": {"kind": "SPAN_KIND_CLIENT"}, "bad kind": {"kind": 9},
    "list kind": {"kind": [1]}, "no status": {"status": _GONE}, "error": {"status": {"code": 2, "message": "m"}},
    "status name": {"status": {"code": "STATUS_CODE_OK"}}, "bad status": {"status": {"code": 7}},
    "status list": {"status": [1]}, "no name": {"name": _GONE}, "int times": {"startTimeUnixNano": 5, "endTimeUnixNano": 9},
    "no times": {"startTimeUnixNano": _GONE, "endTimeUnixNano": None}, "bad time": {"endTimeUnixNano": "x"},
    "events": {"events": [{"name": "e", "timeUnixNano": "7", "attributes": [{"key": "a", "value": {"intValue": 1}}]}]},
    "no attributes": {"attributes": _GONE}, "empty attributes": {"attributes": []},
    "attributes object": {"attributes": {"k": "v"}}, "attributes string": {"attributes": "kv"},
    "every value type": {"attributes": [
        {"key": "i", "value": {"intValue": "7"}}, {"key": "n", "value": {"intValue": 8}},
        {"key": "b", "value": {"boolValue": True}}, {"key": "d", "value": {"doubleValue": "1.5"}},
        {"key": "a", "value": {"arrayValue": {"values": [_SV, {"intValue": "2"}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": _SV}]}}},
        {"key": "by", "value": {"bytesValue": "AAE="}}, {"key": "e", "value": {}},
        {"key": "nostr", "value": {"stringValue": None}}, {"key": "both", "value": {"intValue": "1", "stringValue": "s"}},
        {"key": "nonstr", "value": {"stringValue": 5}}]},
    "value kinds": {"attributes": [
        {"key": "i", "value": {"intValue": "7"}}, {"key": "n", "value": {"intValue": -8}},
        {"key": "b", "value": {"boolValue": False}}, {"key": "d", "value": {"doubleValue": 2}},
        {"key": "a", "value": {"arrayValue": {"values": [_SV, {"doubleValue": "1.5"}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"intValue": "1"}}]}}},
        {"key": "by", "value": {"bytesValue": "AAE="}}, {"key": "e", "value": {}}, {"key": "s", "value": _SV}]},
    "duplicate keys": {"attributes": [{"key": "k", "value": {"intValue": "1"}}, {"key": "k", "value": _SV},
                                      {"key": "j", "value": _SV}, {"key": "j", "value": {"intValue": "2"}}]},
    "value missing": {"attributes": [{"key": "k"}]}, "value is null": {"attributes": [{"key": "k", "value": None}]}, "key missing": {"attributes": [{"value": _SV}]},
    "value is a string": {"attributes": [{"key": "k", "value": "a stringValue"}]},
    "value is a list": {"attributes": [{"key": "k", "value": ["stringValue"]}]},
    "value is a number": {"attributes": [{"key": "k", "value": 0}]},
    "value is empty": {"attributes": [{"key": "k", "value": ""}]},
    "unknown value": {"attributes": [{"key": "k", "value": {"fooValue": 1}}]},
    "bad int": {"attributes": [{"key": "k", "value": {"intValue": "x"}}]},
    "extra kv field": {"attributes": [{"key": "k", "value": _SV, "extra": 1}]},
    "span is a string": "span",
}


def _reference(s: Any) -> Any:
    try:
        return fields(otlp_json._otlp_json_span(s, otlp_json.EMPTY_RESOURCE))
    except (values.Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"where[0]: {values.why(exc)}"


@pytest.mark.parametrize("case", sorted(_ODD_SPANS))
def test_fast_path_reads_each_form_as_the_reference(case: str) -> None:
    kw = _ODD_SPANS[case]
    s = _span(**kw) if isinstance(kw, dict) else kw
    out: list[Any] = []
    rejects: list[str] = []
    otlp_json._otlp_json_spans([s], otlp_json.EMPTY_RESOURCE, out, "where", rejects.append)
    got = rejects[0] if rejects else fields(out[0])
    assert len(out) + len(rejects) == 1 and got == _reference(s)


def test_fast_path_parents_are_per_trace_and_per_remoteness() -> None:
    """Spans share the context of a common parent, never across traces or remote/local."""
    spans = [_span(spanId="1" * 16), _span(spanId="2" * 16), _span(spanId="3" * 16, traceId=_T2),
             _span(spanId="4" * 16, flags=0x300), _span(spanId="5" * 16, parentSpanId="ab" * 8),
             _span(spanId="6" * 16), _span(spanId="7" * 16, traceId="zz"), _span(spanId="8" * 16)]
    out: list[Any] = []
    rejects: list[str] = []
    otlp_json._otlp_json_spans(spans, otlp_json.EMPTY_RESOURCE, out, "where", rejects.append)
    assert [fields(s) for s in out] == [_reference(s) for s in spans if s["traceId"] != "zz"]
    assert rejects == [_reference(spans[6]).replace("[0]", "[6]")]
    assert out[0].parent is out[1].parent and out[4].parent is not out[0].parent  # shared: one parent, one context
    assert out[2].parent.trace_id == int(_T2, 16) and out[3].parent.is_remote and not out[0].parent.is_remote


def test_reading_leaves_the_gc_as_it_was(spans: list[ReadableSpan], tmp_path: Path) -> None:
    import gc

    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl")
    assert gc.isenabled()
    read(path)
    assert gc.isenabled()
    path.write_text(path.read_text() + "not json\n")
    with pytest.raises(RejectedInput):
        read(path, strict=True)
    assert gc.isenabled()
    gc.disable()
    try:
        read(path)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("case", ["common", "no parent", "remote parent", "base64 ids", "no kind", "no status", "error",
                                  "events", "every value type", "duplicate keys", "no attributes", "int times"])
def test_usual_forms_take_the_fast_path(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(*_a: Any) -> None:
        raise AssertionError("slow path taken")

    expected = _reference(_span(**_ODD_SPANS[case]))  # type: ignore[arg-type]
    monkeypatch.setattr(otlp_json, "_otlp_json_span", slow)
    out: list[Any] = []
    otlp_json._otlp_json_spans([_span(**_ODD_SPANS[case])], otlp_json.EMPTY_RESOURCE, out, "where", print)  # type: ignore[arg-type]
    assert [fields(s) for s in out] == [expected]


def _pb_span(**kw: Any) -> Any:
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    s = Span(trace_id=bytes.fromhex(_T), span_id=bytes.fromhex(_S), parent_span_id=bytes.fromhex(_P), flags=256,
             name="n", kind=1, start_time_unix_nano=5, end_time_unix_nano=9)
    s.attributes.add(key="k").value.string_value = "v"
    s.attributes.add(key="empty").value.string_value = ""
    s.attributes.add(key="i").value.int_value = 0
    for k, v in kw.items():
        if k == "status":
            s.status.code, s.status.message = v
        elif k == "events":
            s.events.add(name="e", time_unix_nano=7).attributes.add(key="a").value.bool_value = True
        else:
            setattr(s, k, v)
    return s


_ODD_PB_SPANS = {
    "common": {}, "no parent": {"parent_span_id": b""}, "remote parent": {"flags": 0x300},
    "short trace id": {"trace_id": b"\x01" * 15}, "zero span id": {"span_id": bytes(8)},
    "short parent": {"parent_span_id": b"\x01"}, "zero parent": {"parent_span_id": bytes(8)},
    "error": {"status": (2, "m")}, "unset status": {"status": (0, "")}, "bad status": {"status": (9, "")},
    "bad kind": {"kind": 9}, "events": {"events": True},
}


@pytest.mark.parametrize("case", sorted(_ODD_PB_SPANS))
def test_protobuf_fast_path_reads_each_form_as_the_reference(case: str) -> None:
    from otel_agenteval.replay.formats import protobuf

    s = _pb_span(**_ODD_PB_SPANS[case])
    try:
        expected = fields(protobuf._span(s, otlp_json.EMPTY_RESOURCE))
    except values.Bad as exc:
        expected = f"where[0]: {exc}"
    out: list[Any] = []
    rejects: list[str] = []
    protobuf._spans([s], otlp_json.EMPTY_RESOURCE, out, "where", rejects.append)
    assert len(out) + len(rejects) == 1 and (rejects[0] if rejects else fields(out[0])) == expected
    if case == "common":
        assert out[0].attributes == {"k": "v", "empty": "", "i": 0}


# --- the typed path (msgspec, when installed) reads every record as the dict path does ----------
def _request(spans: list[Any], resource: Any = _GONE, **rs: Any) -> dict[str, Any]:
    doc_rs: dict[str, Any] = {"scopeSpans": [{"scope": {"name": "s"}, "spans": spans}], **rs}
    if resource is not _GONE:
        doc_rs["resource"] = resource
    return {"resourceSpans": [doc_rs]}


_ODD_REQUESTS: dict[str, Any] = {
    "no resource": _request([_span()]), "null resource": _request([_span()], None),
    "empty resource": _request([_span()], {}),
    "resource values": _request([_span()], {"attributes": [{"key": "n", "value": {"intValue": 3}}], "x": 1}),
    "resource null attributes": _request([_span()], {"attributes": None}),
    "old scope name": {"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": [_span()]}]}]},
    "null spans": {"resourceSpans": [{"scopeSpans": [{"spans": None}]}]},
    "spans object": {"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]},
    "null scopeSpans": {"resourceSpans": [{"scopeSpans": None}]}, "empty": {"resourceSpans": []},
    "null resourceSpans": {"resourceSpans": None}, "extra keys": {"resourceSpans": [], "x": [1]},
    "two resources": {"resourceSpans": [_request([_span()])["resourceSpans"][0],
                                        _request([_span(traceId=_T2)], {})["resourceSpans"][0]]},
    "event forms": _request([_span(events=[{"name": None}]), _span(events=[{}]), _span(events=[{"timeUnixNano": ""}])]),
    "status forms": _request([_span(status={"code": "2"}), _span(status={"x": 1}), _span(status=None),
                              _span(status={"code": 1, "message": ""}), _span(status={"code": "STATUS_CODE_OK"})]),
    "status null message": _request([_span(status={"message": None})]),
    "float times": _request([_span(startTimeUnixNano=5.0, endTimeUnixNano=9.7)]),
    "float flags": _request([_span(flags=256.0)]), "bool kind": _request([_span(kind=True)]),
    "big ints": _request([_span(attributes=[{"key": "b", "value": {"intValue": str(1 << 70)}}])]),
    "big int number": _request([_span(attributes=[{"key": "b", "value": {"intValue": 1 << 70}}])]),
    "int value as float": _request([_span(attributes=[{"key": "b", "value": {"intValue": 2.0}}])]),
    "both values": _request([_span(attributes=[{"key": "b", "value": {"boolValue": None, "doubleValue": 1}}])]),
    "sdk span": {"context": {"trace_id": "0x" + _T, "span_id": "0x" + _S}, "name": "n", "resourceSpans": []},
    **{f"span: {k}": _request([_span(**v) if isinstance(v, dict) else v]) for k, v in _ODD_SPANS.items()},
}


def _dict_path(data: bytes) -> tuple[Any, list[str]]:
    rejects: list[str] = []
    try:
        got = [fields(s) for s in decode.spans_from_json(decode.parse(data), "w", rejects.append)]
    except (values.Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"w: {values.why(exc)}", rejects
    return got, rejects


@pytest.mark.parametrize("case", sorted(_ODD_REQUESTS))
def test_typed_path_reads_each_form_as_the_dict_path(case: str) -> None:
    pytest.importorskip("msgspec")
    assert typed_json.typed_request is not None
    for data in (json.dumps(_ODD_REQUESTS[case]).encode(), json.dumps(_ODD_REQUESTS[case], indent=2).encode()):
        typed = typed_json.typed_request(data)
        expected, rejects = _dict_path(data)
        if typed is not None:  # taken: exactly the spans of the dict path, and nothing it rejects
            assert rejects == [] and [fields(s) for s in typed] == expected


@pytest.mark.parametrize("case", ["span: common", "span: no parent", "span: remote parent", "span: base64 ids",
                                  "span: error", "span: events", "span: value kinds", "span: no kind",
                                  "span: kind name", "span: no status", "span: int times", "span: duplicate keys",
                                  "two resources", "resource values", "old scope name", "status forms"])
def test_usual_requests_take_the_typed_path(case: str) -> None:
    pytest.importorskip("msgspec")
    assert typed_json.typed_request is not None
    data = json.dumps(_ODD_REQUESTS[case]).encode()
    typed = typed_json.typed_request(data)
    assert typed is not None and [fields(s) for s in typed] == _dict_path(data)[0]


def test_odd_numbers_leave_the_typed_path(tmp_path: Path) -> None:
    """Odd forms are not guessed at: each is read (or named) by the dict path, as before."""
    pytest.importorskip("msgspec")
    assert typed_json.typed_request is not None
    for odd in ({"startTimeUnixNano": "5.0"}, {"endTimeUnixNano": "1e3"}, {"flags": "768"}, {"traceId": "0" * 32},
                {"attributes": [{"key": "k", "value": {"stringValue": None}}]}):
        assert typed_json.typed_request(json.dumps(_request([_span(**odd)])).encode()) is None


@pytest.mark.parametrize("fmt", sorted(tf.WRITERS))
def test_typed_and_dict_paths_read_every_format_alike(fmt: str, spans: list[ReadableSpan], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_agenteval.replay import readers

    write, ext = tf.WRITERS[fmt]
    path = write(spans, tmp_path / f"traces{ext}")
    got, counts, rejects = read(path)
    monkeypatch.setattr(readers, "typed_request", None)
    got_dict, counts_dict, rejects_dict = read(path)
    assert [fields(s) for s in got] == [fields(s) for s in got_dict]
    assert (counts.as_dict(), rejects) == (counts_dict.as_dict(), rejects_dict)


def test_a_bad_span_in_the_first_protobuf_record_is_a_rejected_span_not_a_bad_file(
        spans: list[ReadableSpan], tmp_path: Path) -> None:
    """Only a first record that is not OTLP at all makes the file "not trace data" (one error);
    a bad span inside a good first record is rejected and counted like any other."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    first = encode_spans(spans[:3])
    first.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01\x02\x03"  # 3 bytes: a bad span
    rest = encode_spans(spans[3:]).SerializeToString()
    data = first.SerializeToString()
    path = tmp_path / "t.pb"
    path.write_bytes(tf._varint(len(data)) + data + tf._varint(len(rest)) + rest)
    got, counts, rejects = read(path)
    assert len(rejects) == 1 and "record 1 " in rejects[0] and len(got) == len(spans) - 1
    garbage = tmp_path / "g.pb"
    garbage.write_bytes(bytes([40]) + bytes(range(200, 240)))  # a length prefix, then no OTLP request
    with pytest.raises(InputError, match="g.pb: not trace data"):
        read(garbage)
