"""Write real SDK spans to trace files in every format ``replay`` reads (test helper).

Each writer takes finished ``ReadableSpan`` objects (from an ``InMemorySpanExporter``) in end
order and writes them the way the tool that makes such files does.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from otel_agenteval.replay.write import _hex_ids


def _batches(spans: Sequence[ReadableSpan], batch: int) -> list[Sequence[ReadableSpan]]:
    return [spans[i:i + batch] for i in range(0, len(spans), batch)]


def _write(path: Path, data: bytes) -> Path:
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def otlp_json_lines(spans: Sequence[ReadableSpan], path: Path, batch: int = 5, *, int_enums: bool = True) -> Path:
    """One ``ExportTraceServiceRequest`` per line, hex ids: what the Collector's file exporter writes."""
    lines = []
    for b in _batches(spans, batch):
        doc = json.loads(MessageToJson(encode_spans(b), indent=None, use_integers_for_enums=int_enums))
        lines.append(json.dumps(_hex_ids(doc), separators=(",", ":")))
    return _write(path, ("\n".join(lines) + "\n").encode())


def otlp_json_document(spans: Sequence[ReadableSpan], path: Path) -> Path:
    """One pretty-printed request, protobuf's own JSON mapping (base64 ids, enum names)."""
    return _write(path, MessageToJson(encode_spans(spans)).encode() + b"\n")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def otlp_protobuf(spans: Sequence[ReadableSpan], path: Path, batch: int = 5, *, framing: str = "varint") -> Path:
    """Requests as protobuf: ``varint`` delimited, ``be32`` (Collector file exporter) or ``single``."""
    if framing == "single":
        return _write(path, encode_spans(spans).SerializeToString())
    out = bytearray()
    for b in _batches(spans, batch):
        msg = encode_spans(b).SerializeToString()
        out += _varint(len(msg)) if framing == "varint" else len(msg).to_bytes(4, "big")
        out += msg
    return _write(path, bytes(out))


def sdk_json_objects(spans: Sequence[ReadableSpan], path: Path) -> Path:
    """``span.to_json()`` one after another: what ``ConsoleSpanExporter`` prints."""
    return _write(path, "".join(s.to_json() + "\n" for s in spans).encode())


def sdk_json_list(spans: Sequence[ReadableSpan], path: Path) -> Path:
    """A JSON list of ``span.to_json()`` (how the captures of span-shapes.md were saved)."""
    return _write(path, ("[\n" + ",\n".join(s.to_json() for s in spans) + "\n]\n").encode())


WRITERS = {
    "otlp-json-lines": (otlp_json_lines, ".jsonl"),
    "otlp-json-document": (otlp_json_document, ".json"),
    "otlp-protobuf-varint": (otlp_protobuf, ".pb"),
    "otlp-protobuf-be32": (lambda s, p: otlp_protobuf(s, p, framing="be32"), ".pb"),
    "otlp-protobuf-single": (lambda s, p: otlp_protobuf(s, p, framing="single"), ".pb"),
    "sdk-json-objects": (sdk_json_objects, ".json"),
    "sdk-json-list": (sdk_json_list, ".json"),
}


# --- a scenario that exercises every rule and span shape replay must carry -------------------
def record_scenario(h: Any) -> None:
    """Runs through a ``conftest.Harness`` (policy: ``ISSUE_POLICY``). Finished spans go to
    whatever exporter the harness's provider has, in end order."""
    from conftest import ns
    from opentelemetry import trace
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    claim = {"order_id": "88120", "reason": "damaged"}
    # 1. a failed write retried with the same arguments (warning), tokens, typed attributes
    root = h.agent("support", 0.0, conv="c1")
    h.chat(root, at=0.5, inp=1200, out=80)
    h.tool(root, "lookup_order", {"order_id": "88120"}, at=1.0, result='{"status": "delivered"}', call_id="call_1",
           end_attrs={"x.list": ["a", "b"], "x.ints": [1, 2], "x.int": 3, "x.float": 1.5, "x.bool": True})
    span = h.start("execute_tool create_claim", root, 2.0, {"gen_ai.operation.name": "execute_tool",
                                                             "gen_ai.tool.name": "create_claim",
                                                             "gen_ai.tool.call.arguments": json.dumps(claim)})
    h.end(span, 2.2, events=[("exception", {"exception.type": "shop.ClaimError", "exception.message": "boom"})],
          error="ClaimError: boom")
    h.chat(root, at=2.5, inp=1500, out=60)
    h.tool(root, "create_claim", claim, at=3.0, conv="c1")
    h.end(root, 4.0)
    # 2. the same write again in a later run of the conversation: duplicate_write (critical)
    h.run("support", [("create_claim", claim)], at=10.0, conv="c1")
    # 3. nine steps for an agent whose own budget allows eight (the default "*" allows twelve):
    #    only right if the agent's name is known when the tools end, as it is live
    h.run("support", [("lookup_order", {"order_id": str(i)}) for i in range(9)], at=20.0, step=1.0)
    # 4. an agent under a server span whose parent is in another service (remote)
    remote = SpanContext(trace_id=0x5EED, span_id=0xCAFE, is_remote=True, trace_flags=TraceFlags(1))
    server = h.tracer.start_span("POST /chat", context=trace.set_span_in_context(trace.NonRecordingSpan(remote)),
                                 kind=SpanKind.SERVER, start_time=ns(40.0))
    h.run("triage", [("get_policy", {"topic": "damaged_delivery"})], at=40.1, parent=server, step=0.2)
    server.end(end_time=ns(41.0))
    # 5. a trace with no agent activity at all
    h.end(h.start("GET /health", None, 50.0), 50.1)


def recorded(make_processor: Any, policy: str) -> tuple[Any, list[ReadableSpan]]:
    """(harness, finished spans in end order): the scenario, seen live and exported."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    h = make_processor(policy)
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    record_scenario(h)
    h.provider.force_flush()
    return h, list(exporter.get_finished_spans())
