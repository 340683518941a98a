"""Synthetic agent traces as OTLP JSON lines, shaped like pydantic-ai's (GenAI semconv).

Each run: 1 ``invoke_agent`` root, 5 ``chat`` spans, 8 ``execute_tool`` spans (~14 spans),
written in end order, ``--batch`` spans per line like the Collector's file exporter (hex ids,
string int64s, numeric enums). One run in eight has a failing tool call; one in fifty
repeats a write (a ``duplicate_write``), so the rules have something to find.

    python benchmarks/make_otlp_traces.py OUT.jsonl[.gz] --runs 10000 [--batch 128] [--seed 1]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

T0 = 1_760_000_000 * 1_000_000_000
TOOLS = (
    ("lookup_order", '{"order_id":"%d"}', '{"status":"delivered","items":2,"carrier":"UPS"}'),
    ("get_policy", '{"topic":"damaged_delivery"}', "Damaged items can be refunded or replaced within 30 days."),
    ("search_kb", '{"query":"damaged item refund","top_k":3}', '[{"id":"kb-12","score":0.91},{"id":"kb-7","score":0.8}]'),
    ("get_customer", '{"customer_id":"c-%d"}', '{"tier":"gold","since":"2021-04-02"}'),
    ("check_inventory", '{"sku":"SKU-1182"}', '{"in_stock":14}'),
    ("create_claim", '{"order_id":"%d","reason":"damaged"}', '{"claim_id":"CL-%d"}'),
    ("send_email", '{"to":"customer-%d@example.com","template":"claim_opened"}', '{"sent":true}'),
    ("close_ticket", '{"ticket":"T-%d"}', '{"closed":true}'),
)
POLICY = """\
version: 1
tools:
  create_claim: {write: true}
  send_email: {write: true}
agents:
  "*": {budget: {max_steps: 40, max_llm_calls: 20, max_tokens: 200000, max_cost_usd: 5.0, max_duration_s: 600}}
pricing:
  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10.0}
outcome:
  success_when: [create_claim]
"""


def _s(k: str, v: str) -> dict[str, Any]:
    return {"key": k, "value": {"stringValue": v}}


def _i(k: str, v: int) -> dict[str, Any]:
    return {"key": k, "value": {"intValue": str(v)}}


class _Ids:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def trace(self) -> str:
        return format(self.rng.getrandbits(128) | 1, "032x")

    def span(self) -> str:
        return format(self.rng.getrandbits(64) | 1, "016x")


def run_spans(n: int, rng: random.Random, ids: _Ids, t: int) -> list[dict[str, Any]]:
    """One agent run's spans, in end order."""
    trace, root = ids.trace(), ids.span()
    conv = f"conv-{n // 2}"  # two runs per conversation
    common = [_s("gen_ai.agent.name", "support"), _s("gen_ai.conversation.id", conv)]
    out: list[dict[str, Any]] = []
    start = t
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"My order {n} arrived damaged."}]}])

    def span(name: str, kind: int, a: int, b: int, attrs: list[dict[str, Any]], error: bool = False) -> dict[str, Any]:
        s: dict[str, Any] = {"traceId": trace, "spanId": ids.span(), "parentSpanId": root, "flags": 256, "name": name,
                             "kind": kind, "startTimeUnixNano": str(a), "endTimeUnixNano": str(b),
                             "attributes": attrs, "status": {"code": 2, "message": "tool failed"} if error else {}}
        if error:
            s["events"] = [{"timeUnixNano": str(b), "name": "exception",
                            "attributes": [_s("exception.type", "RuntimeError"), _s("exception.message", "boom")]}]
        return s

    fail_at = rng.randrange(8) if n % 8 == 0 else -1
    for turn in range(5):
        a = t + 1_000_000
        t = a + rng.randrange(200, 900) * 1_000_000
        out.append(span("chat gpt-4o", 3, a, t, [
            _s("gen_ai.operation.name", "chat"), *common, _s("gen_ai.request.model", "gpt-4o"),
            _s("gen_ai.response.model", "gpt-4o-2024-08-06"), _s("gen_ai.provider.name", "openai"),
            _i("gen_ai.usage.input_tokens", 400 + 150 * turn), _i("gen_ai.usage.output_tokens", 40 + turn),
            _s("gen_ai.input.messages", messages)]))
        for k in range(2 if turn < 4 else 0):
            i = (turn * 2 + k) % 8
            tool, args, result = TOOLS[i]
            a = t + 100_000
            t = a + rng.randrange(5, 80) * 1_000_000
            out.append(span(f"execute_tool {tool}", 1, a, t, [
                _s("gen_ai.operation.name", "execute_tool"), *common, _s("gen_ai.tool.name", tool),
                _s("gen_ai.tool.call.id", f"call_{n}_{i}"),
                _s("gen_ai.tool.call.arguments", args.replace("%d", str(n))),
                _s("gen_ai.tool.call.result", result.replace("%d", str(n)))], error=i == fail_at))
    if n % 50 == 0:  # a repeated write
        tool, args, result = TOOLS[5]
        a = t + 100_000
        t = a + 20_000_000
        out.append(span(f"execute_tool {tool}", 1, a, t, [
            _s("gen_ai.operation.name", "execute_tool"), *common, _s("gen_ai.tool.name", tool),
            _s("gen_ai.tool.call.arguments", args.replace("%d", str(n)))]))
    t += 2_000_000
    out.append({"traceId": trace, "spanId": root, "flags": 256, "name": "invoke_agent support", "kind": 1,
                "startTimeUnixNano": str(start), "endTimeUnixNano": str(t), "status": {},
                "attributes": [_s("gen_ai.operation.name", "invoke_agent"), *common, _s("model_name", "gpt-4o"),
                               _s("final_result", f"I have opened claim CL-{n} for you."),
                               _i("gen_ai.aggregated_usage.input_tokens", 4000),
                               _i("gen_ai.aggregated_usage.output_tokens", 210)]})
    return out


def write(out: IO[str], runs: int, batch: int, seed: int) -> int:
    rng = random.Random(seed)
    ids = _Ids(rng)
    resource = {"attributes": [_s("service.name", "support-agent"), _s("telemetry.sdk.language", "python")]}
    scope = {"name": "pydantic-ai", "version": "2.68.0"}
    pending: list[dict[str, Any]] = []
    spans = 0
    t = T0
    for n in range(runs):
        pending.extend(run_spans(n, rng, ids, t))
        t += 3_000_000_000
        while len(pending) >= batch or (n == runs - 1 and pending):
            chunk, pending = pending[:batch], pending[batch:]
            spans += len(chunk)
            doc = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": chunk}]}]}
            out.write(json.dumps(doc, separators=(",", ":")))
            out.write("\n")
    return spans


def bench_workdir(doc: str, prefix: str, argv: list[str] | None) -> tuple[argparse.Namespace, Path]:
    """The options the throughput benchmarks share, and their working folder (policy written)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="1000,10000,100000", help="comma-separated run counts")
    ap.add_argument("--dir", help="where to write the files (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    a = ap.parse_args(argv)
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    (work / "policy.yaml").write_text(POLICY)
    return a, work


def runs_file(work: Path, runs: int) -> Path:
    """``work/runs-N.jsonl``, generated (seed 1, 128 spans a line) unless it is there already."""
    path = work / f"runs-{runs}.jsonl"
    if not path.exists():
        t = time.perf_counter()
        with open(path, "w", encoding="utf-8") as f:
            spans = write(f, runs, 128, 1)
        print(f"generated {path.name}: {spans} spans, {path.stat().st_size / 1e6:.0f} MB "
              f"in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


def count_spans(path: Path) -> int:
    from otel_agenteval.replay.readers import ReadCounts, iter_batches

    counts = ReadCounts()
    for _ in iter_batches([path], counts=counts):
        pass
    return counts.spans


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", help="also write the matching policy YAML here")
    a = ap.parse_args(argv)
    opener = gzip.open if a.out.endswith(".gz") else open
    with opener(a.out, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        spans = write(f, a.runs, a.batch, a.seed)
    if a.policy:
        with open(a.policy, "w", encoding="utf-8") as f:
            f.write(POLICY)
    print(f"wrote {a.runs} runs, {spans} spans to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
