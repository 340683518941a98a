"""Fuzz the processor through the public API: hostile spans must never reach the host or blind the monitor.

An app's TracerProvider with a BatchSpanProcessor (no-op exporter) and a TrajectoryProcessor
gets seeded random agent runs: every span family the engine reads (GenAI semconv, OpenInference,
pydantic-ai legacy, confirmations), attribute values of random types and sizes (lone surrogates,
control characters, NaN/inf, negative and 100-digit token counts, 1 MB strings, arguments nested
up to 100,000 deep), end before start, times 100 years ahead, spans delivered twice to
``on_end``, forged and remote parents (other runs' span ids), roots that never end.

Checked at the end (exit 1 if any fails):
- no exception escaped from the processor into the app (``span.end()``, ``start_span``);
- every error the processor caught is counted: ``stats()["errors"]`` equals the scraped
  ``agenteval_processor_errors_total``, and each is attributed to the fuzz features of the span
  that caused it (printed, with a reproducer, so the lead can see what broke);
- the registry encodes in both formats by prometheus_client alone (labels safe where they
  enter) and ``/metrics`` answers over HTTP in both formats, bodies parsed back;
- a clean run afterwards is still checked right (its duplicate write found).

    python benchmarks/fuzz_spans.py [--spans 100000] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections import Counter
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _harness import make_app, quiet, sample, scrape  # noqa: E402

from otel_agenteval import Policy  # noqa: E402

POLICY = Policy.from_dict({
    "tools": {"create_claim": {"write": True, "requires_confirmation": True, "grounded": True},
              "issue_refund": {"write": True, "destructive": True, "requires_before": ["lookup_order"]}},
    "agents": {"*": {"budget": {"max_steps": 20, "max_tokens": 10_000, "max_cost_usd": 1.0, "max_duration_s": 60,
                                "max_repeats": 3}},
               "support": {"allowed_tools": ["lookup_order", "create_claim", "issue_refund"]}},
    "pricing": {"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}},
    "confirmation": {"tools": ["ask_user_confirmation"]},
    "outcome": {"success_when": ["create_claim"]},
    "limits": {"max_open_trajectories": 2_000, "max_open_spans": 20_000, "max_conversations": 2_000},
})
TOOLS = ("lookup_order", "create_claim", "issue_refund", "ask_user_confirmation", "search", "t\udc80", "")
AGENTS = ("support", "billing", "a\ud800gent", "x\x00\x1b[2J", "", "other", "*")
T0 = time.time_ns()


class Fuzzer:
    def __init__(self, seed: int, tracer: trace.Tracer, processor: Any) -> None:
        self.rng = random.Random(seed)
        self.tracer = tracer
        self.processor = processor
        self.recent: list[SpanContext] = []  # for forged parents
        self.ended: list[Any] = []  # for double delivery
        self.spans = 0
        self.features: set[str] = set()
        self.errors = processor.engine._stats["errors"]  # read only: which span made each counted error
        self.by_feature: Counter[str] = Counter()
        self.run_features: set[str] = set()

    def _charge(self, before: int) -> None:
        caused = sum(self.errors.values()) - before
        if caused:
            self.by_feature["+".join(sorted(self.features)) or "plain"] += caused
        self.run_features |= self.features

    # --- values -------------------------------------------------------------------------------
    def text(self) -> str:
        r = self.rng.random()
        if r < 0.5:
            return self.rng.choice(("order-1", "yes", "ok", "42", "gpt-4o", "refund 45 EUR", "support"))
        if r < 0.6:
            self.features.add("surrogate")
            return "v" + chr(self.rng.randint(0xD800, 0xDFFF)) * self.rng.randint(1, 3)
        if r < 0.7:
            self.features.add("control")
            return "".join(chr(self.rng.randint(0, 31)) for _ in range(self.rng.randint(1, 8)))
        if r < 0.8:
            return "".join(chr(self.rng.randint(0x80, 0x10FFFF)) for _ in range(self.rng.randint(1, 20))
                           ).encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
        if r < 0.803:
            self.features.add("huge")
            return "h" * self.rng.choice((100_000, 1_000_000))
        return str(self.rng.random())

    def value(self) -> Any:
        r = self.rng.random()
        if r < 0.55:
            return self.text()
        if r < 0.7:
            self.features.add("number")
            return self.rng.choice((0, -1, 1, 7, 2**63, -(2**63), 10**100 if self.rng.random() < 0.1 else 3))
        if r < 0.8:
            self.features.add("nan")
            return self.rng.choice((float("nan"), float("inf"), -float("inf"), -0.0, 1e308, 0.5))
        if r < 0.85:
            return self.rng.random() < 0.5
        if r < 0.95:
            return [self.text() for _ in range(self.rng.randint(0, 4))]
        return [self.rng.random() for _ in range(self.rng.randint(0, 4))]

    def arguments(self) -> Any:
        r = self.rng.random()
        if r < 0.6:
            return json.dumps({self.rng.choice(("order_id", "amount", "note", "x\udc80")): self.value()
                               for _ in range(self.rng.randint(0, 4))}, default=str)
        if r < 0.63:
            self.features.add("deep")
            d = self.rng.choice((100, 1_000, 10_000, 75_000, 100_000))
            return self.rng.choice(("[" * d + "]" * d, '{"a":' * d + "1" + "}" * d))
        if r < 0.7:
            return "{not json" + self.text()
        return self.value()

    def attrs(self, kind: str) -> dict[str, Any]:
        rng = self.rng
        a: dict[str, Any] = {}
        if kind == "tool":
            a["gen_ai.operation.name"] = "execute_tool"
            a["gen_ai.tool.name"] = rng.choice(TOOLS) if rng.random() < 0.8 else self.value()
            a["gen_ai.tool.call.arguments"] = self.arguments()
            if rng.random() < 0.5:
                a["gen_ai.tool.call.id"] = self.text()
        elif kind == "chat":
            a["gen_ai.operation.name"] = rng.choice(("chat", "text_completion", "generate_content"))
            a["gen_ai.request.model"] = rng.choice(("gpt-4o", self.text()))
            a["gen_ai.usage.input_tokens"] = self.value()
            a["gen_ai.usage.output_tokens"] = self.value()
        elif kind == "agent":
            a["gen_ai.operation.name"] = "invoke_agent"
            a["gen_ai.agent.name"] = rng.choice(AGENTS) if rng.random() < 0.7 else self.value()
        elif kind == "oi":
            a["openinference.span.kind"] = rng.choice(("TOOL", "LLM", "AGENT", "CHAIN", self.text()))
            a["tool.name"] = self.value()
            a["input.value"] = self.arguments()
            a["llm.token_count.prompt"] = self.value()
        elif kind == "legacy":
            a["tool_arguments"] = self.arguments()
            a["agent_name"] = self.value()
        elif kind == "confirmation":
            a["agenteval.confirmation"] = True
            a["agenteval.confirmation.tool"] = rng.choice(TOOLS)
            a["agenteval.confirmation.arguments"] = self.arguments()
            a["agenteval.approved"] = self.value()
        for _ in range(rng.randint(0, 3)):  # any attribute the engine reads, any value
            a[rng.choice(("gen_ai.conversation.id", "session.id", "agenteval.outcome", "error.type",
                          "gen_ai.tool.call.result", "gen_ai.input.messages", "gen_ai.output.messages",
                          "gen_ai.aggregated_usage.input_tokens", "gen_ai.tool.status"))] = self.value()
        return a

    # --- spans --------------------------------------------------------------------------------
    def when(self, at: int) -> int:
        r = self.rng.random()
        if r < 0.01:
            self.features.add("future")
            return at + 100 * 365 * 86400 * 10**9
        if r < 0.02:
            self.features.add("past")
            return max(at - 10**12, 1)
        return at + self.rng.randint(0, 10**9)

    def span(self, name: str, parent: Context, kind: str, at: int) -> Any:
        self.spans += 1
        self.features = set()
        attrs = self.attrs(kind)
        started = self.when(at)
        before = sum(self.errors.values())
        s = self.tracer.start_span(name, context=parent, attributes=attrs, start_time=started,
                                   kind=self.rng.choice(list(SpanKind)))
        self._charge(before)
        s._fuzz = self.features  # what this span carries, for the errors its end causes
        self.recent.append(s.get_span_context())
        if len(self.recent) > 500:
            del self.recent[:250]
        return s

    def end(self, s: Any, at: int) -> None:
        self.features = set(s._fuzz)
        before = sum(self.errors.values())
        try:
            self._end(s, at)
        finally:
            self._charge(before)

    def _end(self, s: Any, at: int) -> None:
        rng = self.rng
        if rng.random() < 0.3:
            s.set_attribute(rng.choice(("gen_ai.tool.call.result", "gen_ai.usage.output_tokens",
                                        "gen_ai.agent.name", "agenteval.outcome")), self.value())
        if rng.random() < 0.1:
            s.add_event(rng.choice(("exception", "gen_ai.tool.message", "gen_ai.user.message", "gen_ai.choice")),
                        {"content": self.value(), "message": self.value()})
        if rng.random() < 0.15:
            s.set_status(Status(StatusCode.ERROR, self.text()))
        if rng.random() < 0.03:
            self.features.add("end_before_start")
            s.end(end_time=max((s.start_time or at) - rng.randint(1, 10**12), 0))
        else:
            s.end(end_time=self.when(at))
        if rng.random() < 0.03:
            self.features.add("double")
            self.processor.on_end(s)  # the same span delivered again (a second provider, a re-export)
        elif rng.random() < 0.01 and self.ended:
            self.features.add("double")
            self.processor.on_end(rng.choice(self.ended))
        self.ended.append(s)
        if len(self.ended) > 200:
            del self.ended[:100]

    def parent_of(self, root: Any) -> Context:
        r = self.rng.random()
        if r < 0.9 or not self.recent:
            return trace.set_span_in_context(root)
        self.features.add("forged")
        real = self.rng.choice(self.recent)
        forged = SpanContext(trace_id=self.rng.choice((real.trace_id, self.rng.getrandbits(128) or 1)),
                             span_id=self.rng.choice((real.span_id, self.rng.getrandbits(64) or 1)),
                             is_remote=self.rng.random() < 0.5, trace_flags=TraceFlags(1))
        return trace.set_span_in_context(NonRecordingSpan(forged))

    def run(self) -> None:
        """One agent run: a root, 0..30 children (nested agents among them), the root ended or not."""
        rng = self.rng
        at = T0 + self.spans * 10**6
        root_kind = rng.choice(("agent", "agent", "agent", "oi", "legacy", "plain"))
        root = self.span(rng.choice(("invoke_agent support", "agent run", "root", self.text())), Context(),
                         root_kind, at)
        stack = [root]
        for _ in range(rng.randint(0, 30)):
            kind = rng.choice(("tool", "tool", "tool", "chat", "chat", "agent", "oi", "legacy", "confirmation", "plain"))
            parent = self.parent_of(stack[-1])
            s = self.span(f"{kind} {rng.randint(0, 9)}", parent, kind, at)
            at += rng.randint(0, 10**8)
            if kind == "agent" and rng.random() < 0.5 and len(stack) < 50:
                stack.append(s)  # children go under the nested agent until it ends
                continue
            self.end(s, at)
            if len(stack) > 1 and rng.random() < 0.2:
                self.end(stack.pop(), at)
        while len(stack) > 1:
            self.end(stack.pop(), at)
        if rng.random() < 0.9:
            self.end(root, at + 1)
        else:
            self.run_features.add("never_ends")


def _from_processor(exc: BaseException) -> bool:
    return any("otel_agenteval" in f.filename for f in traceback.extract_tb(exc.__traceback__))


def _caught(fz: Fuzzer, state: Any) -> list[str]:
    """Replays one run (same random choices, new span ids) tracing the exceptions that reach the
    processor's catch sites: what each counted error was, and where it was raised."""
    seen: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "exception" and frame.f_code.co_filename.endswith(("otel_agenteval/engine/engine.py",
                                                                       "otel_agenteval/processor.py")):
            exc_type, exc, tb = arg
            while tb.tb_next is not None:
                tb = tb.tb_next
            where = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 2)[-1]}:{tb.tb_lineno}"
            seen.append(f"{exc_type.__name__}: {str(exc)[:80]!r} raised at {where}")
        return tracer

    after = fz.rng.getstate()
    fz.rng.setstate(state)
    sys.settrace(tracer)
    try:
        fz.run()
    except Exception:  # noqa: BLE001 (the fuzz reports whatever was raised)
        pass
    finally:
        sys.settrace(None)
        fz.rng.setstate(after)
    return list(dict.fromkeys(seen))[:5]


def fuzz(spans: int = 100_000, seed: int = 1) -> dict[str, Any]:
    with quiet():
        return _fuzz(spans, seed)


def _fuzz(spans: int, seed: int) -> dict[str, Any]:
    watch: set[str] = set()
    found: list[Any] = []
    app = make_app(POLICY, on_violation=[lambda v: found.append(v) if v.trace_id in watch else None])
    processor = app.processor
    assert processor is not None
    fz = Fuzzer(seed, app.provider.get_tracer("fuzz"), processor)
    errors_now = fz.errors
    escapes: list[str] = []
    sdk_errors: Counter[str] = Counter()
    by_feature = fz.by_feature
    reproducers: dict[str, str] = {}
    t0 = time.perf_counter()
    runs = replays = 0
    while fz.spans < spans:
        fz.run_features = set()
        state = fz.rng.getstate()
        before = sum(errors_now.values())
        try:
            fz.run()
        except Exception as exc:  # noqa: BLE001 (the fuzz reports whatever was raised)
            if _from_processor(exc):
                escapes.append("".join(traceback.format_exception(exc))[-2000:])
            else:
                sdk_errors[type(exc).__name__] += 1
        if sum(errors_now.values()) > before and replays < 40:
            replays += 1
            for sig in _caught(fz, state):  # one reproducer per kind of error
                reproducers.setdefault(sig, f"run {runs} of --seed {seed} (spans with: "
                                            f"{'+'.join(sorted(fz.run_features))})")
        runs += 1
    elapsed = time.perf_counter() - t0
    before = sum(errors_now.values())
    app.provider.force_flush()  # finalises what is still open: rules run on those runs now
    if sum(errors_now.values()) > before:
        by_feature["(force_flush)"] += sum(errors_now.values()) - before
    stats = processor.stats()
    raw_ok: dict[str, str] = {}
    for fmt, gen in (("text", generate_latest), ("openmetrics", generate_openmetrics)):
        try:
            gen(app.registry).decode("utf-8")
            raw_ok[fmt] = "ok"
        except Exception as exc:  # noqa: BLE001 (the fuzz reports whatever was raised)
            raw_ok[fmt] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        scraped: Any = vars(scrape(app.registry))
    except Exception as exc:  # noqa: BLE001 (the fuzz reports whatever was raised)
        scraped = f"{type(exc).__name__}: {exc}"[:300]
    scraped_errors = {stage: sample(app.registry, "agenteval_processor_errors_total", stage=stage)
                      for stage in stats["errors"]}
    # a clean run afterwards: its duplicate write must be found
    tracer = app.provider.get_tracer("clean")
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}) as clean_root:
        watch.add(format(clean_root.get_span_context().trace_id, "032x"))
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool create_claim", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                    "gen_ai.tool.call.arguments": '{"order_id": "clean-1"}'}):
                pass
    clean_trace = format(clean_root.get_span_context().trace_id, "032x")
    clean_rules = sorted(v.rule for v in found if v.trace_id == clean_trace)
    app.provider.shutdown()
    return {
        "spans": fz.spans, "runs": runs, "seed": seed, "seconds": round(elapsed, 1),
        "spans_per_s": round(fz.spans / elapsed), "escapes": len(escapes), "escape_tracebacks": escapes[:3],
        "sdk_exceptions": dict(sdk_errors), "processor_errors": stats["errors"],
        "scraped_errors": scraped_errors, "errors_by_feature": dict(by_feature.most_common()),
        "reproducers": reproducers, "raw_registry_encodes": raw_ok,
        "scrape": scraped, "evicted": stats["evicted"], "late": stats["late"],
        "open_spans_dropped": stats["routes_dropped"], "clean_run_rules": clean_rules,
    }


def verdict(report: dict[str, Any]) -> list[str]:
    """What is wrong with a fuzz report (empty: all checks passed)."""
    bad = []
    if report["escapes"]:
        bad.append(f"{report['escapes']} exception(s) escaped from the processor")
    if {k: float(v) for k, v in report["processor_errors"].items()} != report["scraped_errors"]:
        bad.append("processor errors not all counted in agenteval_processor_errors_total")
    if sum(report["processor_errors"].values()) != sum(report["errors_by_feature"].values()):
        bad.append("errors counted outside any span's processing")
    if set(report["raw_registry_encodes"].values()) != {"ok"}:
        bad.append(f"registry does not encode: {report['raw_registry_encodes']}")
    if not isinstance(report["scrape"], dict):
        bad.append(f"/metrics does not scrape: {report['scrape']}")
    if "duplicate_write" not in report["clean_run_rules"]:
        bad.append(f"clean run not checked right: {report['clean_run_rules']}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report = fuzz(args.spans, args.seed)
    bad = verdict(report)
    report["verdict"] = bad or "ok"
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        for k, v in report.items():
            print(f"{k:>22}: {v}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
