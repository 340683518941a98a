"""The mixes ``overhead.py`` measures, and the arms it runs them through.

One agent run is 14 spans (1 agent span, 5 chat spans, 8 tool spans, flat under the agent span as
pydantic-ai makes them; one run in eight has a failing tool call):

- ``pydantic-ai`` replays the spans real pydantic-ai 2.68 emitted for that run
  (``pydantic_ai_shape.json``, made by ``capture_pydantic_ai_shape.py``): every attribute, set
  at start or later by the same span API calls, in the same order, overlapping tool spans and
  the retried tool's exception included; ids, conversation and order number made per run.
- ``tool-heavy`` hand-written spans with a new conversation id per run (as in production: every
  run binds a fresh conversation), the mix issue 27 measures.
- ``lean`` the hand-written spans of the earliest figures (a handful of attributes each).

An arm is a ``TracerProvider`` with a ``BatchSpanProcessor`` (no-op exporter) and, besides it,
the processor under test (or nothing: the SDK's own cost). ``serve_throughput.py`` reads the
same mixes.
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, TrajectoryProcessor

SPANS_PER_RUN = 14  # 1 agent + 5 chat + 8 tool
ERROR_EVERY = 8  # one run in eight has a failing tool call

POLICY_TOOLS = {
    # send_email is named (a read here), so its name does not make it a write: its constant arguments
    # would repeat across a conversation's runs, and the mix measures the clean path
    "tools": {"create_claim": {"write": True}, "send_email": {}},
}
POLICY = Policy.from_dict({
    **POLICY_TOOLS,
    "agents": {"*": {"budget": {"max_steps": 40, "max_llm_calls": 20, "max_tokens": 200_000,
                                "max_cost_usd": 5.0, "max_duration_s": 600}}},
    "pricing": {"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}},
    "outcome": {"success_when": ["create_claim"]},
})
# the policy with rules left out, to tell what each part costs (overhead.py --variants)
VARIANTS = {
    "no_taint": POLICY.model_copy(update={"taint": POLICY.taint.model_copy(update={"enabled": False})}),
    "bare": Policy.from_dict({**POLICY_TOOLS, "taint": {"enabled": False}}),  # no budget, price or success rule
}

# (tool, arguments template, result): the write tool's arguments carry the run number, so no
# run repeats an earlier identical write (no violations fire; the mix measures the clean path).
TOOLS = (
    ("lookup_order", '{"order_id":"RUN"}', '{"status":"delivered","items":2}'),
    ("get_policy", '{"topic":"damaged_delivery"}', "Damaged items can be refunded within 30 days."),
    ("search_kb", '{"query":"damaged item refund","top_k":3}', '[{"id":"kb-12","score":0.91}]'),
    ("get_customer", '{"customer_id":"c-CONV"}', '{"tier":"gold","since":"2021-04-02"}'),
    ("check_inventory", '{"sku":"SKU-1182"}', '{"in_stock":14}'),
    ("create_claim", '{"order_id":"RUN","reason":"damaged"}', '{"claim_id":"CL-RUN"}'),
    ("get_shipping", '{"order_id":"RUN"}', '{"carrier":"ups","eta_days":2}'),
    ("send_email", '{"template":"claim_opened"}', "queued"),
)


class ToolRetry(Exception):
    """What a framework raises when a tool call fails (recorded on the span as an exception)."""


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class EmptyProcessor(SpanProcessor):
    """A second processor that does nothing: the cost of being the SDK's 2nd processor."""

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        pass


class Recorder(SpanProcessor):
    """Keeps (phase, span) in call order; at start a snapshot, as attributes were then."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        snap = span._readable_span()  # shares the live attributes: give it a frozen copy of them now
        snap._attributes = BoundedAttributes(attributes=dict(span.attributes or {}), immutable=True)
        self.calls.append(("start", snap))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append(("end", span))


# --- workload "lean": the hand-written spans of the first figures, unchanged -----------------------
def agent_run(tracer: trace.Tracer, run: int) -> None:
    """One agent run shaped like pydantic-ai's: agent span, 5 chat spans, 8 tool spans (flat)."""
    conv = f"conv-{run // 3}"  # a conversation spans three runs
    common = {"gen_ai.agent.name": "support_agent", "gen_ai.conversation.id": conv}
    agent_attrs = {"gen_ai.operation.name": "invoke_agent", "model_name": "gpt-4o",
                   "gen_ai.agent.call.id": f"run-{run}", **common}
    failing = 2 if run % ERROR_EVERY == 0 else -1
    with tracer.start_as_current_span("invoke_agent support_agent", attributes=agent_attrs) as agent:
        tool_i = 0
        for turn in range(5):
            with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT,
                                              attributes={"gen_ai.operation.name": "chat", **common}) as chat:
                chat.set_attribute("gen_ai.request.model", "gpt-4o")
                chat.set_attribute("gen_ai.response.model", "gpt-4o-2024-08-06")
                chat.set_attribute("gen_ai.usage.input_tokens", 900 + 250 * turn)
                chat.set_attribute("gen_ai.usage.output_tokens", 40 + turn)
            if turn == 4:
                break
            for _ in range(2):
                tool, args, result = TOOLS[tool_i]
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                         "gen_ai.tool.call.id": f"call_{run}_{tool_i}",
                         "gen_ai.tool.call.arguments": args.replace("RUN", str(run)).replace("CONV", str(run // 3)), **common}
                try:
                    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs) as span:
                        if tool_i == failing:
                            span.set_attribute("gen_ai.tool.call.result", "order service timed out")
                            raise ToolRetry("order service timed out")
                        span.set_attribute("gen_ai.tool.call.result", result.replace("RUN", str(run)))
                except ToolRetry:
                    pass
                tool_i += 1
        agent.set_attribute("final_result", f"I have opened claim CL-{run} for you.")
        agent.set_attribute("gen_ai.aggregated_usage.input_tokens", 7000)
        agent.set_attribute("gen_ai.aggregated_usage.output_tokens", 210)


# --- workload "tool-heavy": production's shape, a new conversation per run --------------------------
def tool_heavy_run(tracer: trace.Tracer, run: int) -> None:
    """1 agent span, 5 chat spans, 8 tool spans (the 8 tools, two after each of the first four model
    calls, flat under the agent); a new conversation id per run, as in production, so every run
    binds a fresh conversation and no conversation outlives its run."""
    common = {"gen_ai.agent.name": "support_agent", "gen_ai.conversation.id": f"conv-{run}-{run * 7919 % 10007}"}
    agent_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.call.id": f"run-{run}", **common}
    failing = 3 if run % ERROR_EVERY == 0 else -1
    with tracer.start_as_current_span("invoke_agent support_agent", attributes=agent_attrs):
        for turn in range(5):
            with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 1200 + 250 * turn, "gen_ai.usage.output_tokens": 60, **common}):
                pass
            for i in (range(2 * turn, 2 * turn + 2) if turn < 4 else ()):
                tool, args, result = TOOLS[i]
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                         "gen_ai.tool.call.id": f"call_{run}_{i}",
                         "gen_ai.tool.call.arguments": args.replace("RUN", f"{run}-{i}").replace("CONV", str(run)),
                         **common}
                try:
                    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs) as span:
                        if i == failing:
                            raise ToolRetry("inventory service timed out")
                        span.set_attribute("gen_ai.tool.call.result", result.replace("RUN", str(run)))
                except ToolRetry:
                    pass


# --- workload "pydantic-ai": the captured spans of a real run, replayed --------------------------
SHAPE = Path(__file__).with_name("pydantic_ai_shape.json")


@dataclass
class SpanPlan:
    """One span of a run: how it starts, the calls made on it before it ends, how it fails."""

    name: str
    kind: SpanKind
    child: bool  # runs in its own copy of the context, as each of pydantic-ai's tasks does
    attributes: dict[str, Any]
    calls: list[tuple[str, tuple[Any, ...]]]  # (span method, arguments), in pydantic-ai's order
    failure: BaseException | None = None  # raised through the span (it records it itself first)


@dataclass
class RunPlan:
    spans: list[SpanPlan]
    sequence: list[tuple[bool, int]]  # (start?, span index), in the order the SDK saw them


def replay_run(tracer: trace.Tracer, plan: RunPlan) -> None:
    """One agent run through the plain OTel API, as pydantic-ai makes it: each span opened with
    ``start_as_current_span(..., record_exception=False, set_status_on_exception=False)`` and its
    start attributes; before it ends, the same ``set_attribute(s)`` / ``update_name`` /
    ``record_exception`` / ``set_status`` calls. Tool calls of a turn overlap, each in its own
    context (pydantic-ai runs them as asyncio tasks)."""
    opened: dict[int, tuple[Any, Any, contextvars.Context | None]] = {}
    for start, i in plan.sequence:
        s = plan.spans[i]
        if start:
            cm = tracer.start_as_current_span(s.name, kind=s.kind, attributes=s.attributes,
                                              record_exception=False, set_status_on_exception=False)
            ctx = contextvars.copy_context() if s.child else None
            span = ctx.run(cm.__enter__) if ctx is not None else cm.__enter__()
            opened[i] = (cm, span, ctx)
        else:
            cm, span, ctx = opened.pop(i)
            for method, args in s.calls:
                getattr(span, method)(*args)
            exc = s.failure
            exit_args = (None, None, None) if exc is None else (type(exc), exc, exc.__traceback__)
            if ctx is not None:
                ctx.run(cm.__exit__, *exit_args)
            else:
                cm.__exit__(*exit_args)


class PydanticAIShape:
    """The captured runs as templates; ``plan(run)`` makes one run's spans, with its own ids."""

    def __init__(self, path: Path = SHAPE) -> None:
        doc = json.loads(path.read_text())
        self.source = doc["source"]
        per_run = doc["per_run"]
        # captured value -> this run's value, formatted with run= and conv=
        self.fields: dict[str, str] = {
            per_run["order_id"]: "{run}",  # in the write tool's arguments: no run repeats an earlier write
            per_run["conversation_id"]: "conv-{conv}",  # a conversation spans three runs
            **{rid: "00000000-0000-7000-8000-{run:012x}" for rid in per_run["run_ids"].values()},
            **{cid: f"call_{{run:019d}}_{i:04d}" for i, cid in enumerate(per_run["call_ids"])},
        }
        self.pattern = re.compile("|".join(map(re.escape, self.fields)))
        self.runs = doc["runs"]
        self.exception_types: dict[str, type[Exception]] = {}

    def _text(self, value: Any, run: int) -> Any:
        if not isinstance(value, str) or not self.pattern.search(value):
            return value
        return self.pattern.sub(lambda m: self.fields[m.group()].format(run=run, conv=run // 3), value)

    def _exception(self, spec: dict[str, Any], run: int) -> BaseException:
        """A fresh exception of the captured type, raised from as many frames as the captured one
        (and from its cause, chained), so the SDK formats a traceback as long as pydantic-ai's."""
        cause = self._exception(spec["cause"], run) if "cause" in spec else None
        name = spec["type"]
        if name not in self.exception_types:
            module, _, qualname = name.rpartition(".")
            self.exception_types[name] = type(qualname, (Exception,), {"__module__": module, "__qualname__": qualname})
        kind = self.exception_types[name]
        try:
            _raise_from(spec["traceback_frames"] - 1, kind(self._text(spec["message"], run)), cause)
        except kind as exc:
            return exc
        raise AssertionError("unreachable")

    def plan(self, run: int) -> RunPlan:
        captured = self.runs["tool_retry" if run % ERROR_EVERY == 0 else "clean"]
        spans = []
        for s in captured["spans"]:
            later = s["attributes_later"]
            calls: list[tuple[str, tuple[Any, ...]]] = []
            failure = None
            for c in s["calls"]:
                method = c["call"]
                if method in ("set_attribute", "set_attributes"):
                    values = {k: self._text(c.get("overwritten", {}).get(k, later[k]), run) for k in c["keys"]}
                    calls.append((method, tuple(values.items())[0] if method == "set_attribute" else (values,)))
                elif method == "update_name":
                    calls.append((method, (c["name"],)))
                elif method == "add_event":
                    calls.append((method, (c["name"], c["attributes"])))
                elif method == "set_status":
                    code = StatusCode[c["code"]]
                    calls.append((method, (code,) if c["description"] is None else (code, c["description"])))
                elif method == "record_exception":
                    failure = self._exception(c, run)
                    calls.append((method, (failure, c["attributes"] or None, None, c["escaped"])))
                else:
                    raise ValueError(f"{SHAPE.name}: no replay for span call {method!r}")
            attributes = {k: self._text(v, run) for k, v in s["attributes_at_start"].items()}
            spans.append(SpanPlan(s["name"], SpanKind[s["kind"]], s["parent"] is not None, attributes, calls, failure))
        return RunPlan(spans, [(phase == "start", i) for phase, i in captured["sequence"]])


def _raise_from(depth: int, exc: BaseException, cause: BaseException | None) -> None:
    """Raise ``exc`` ``depth`` frames down (two functions in turn: the traceback module would fold
    a run of identical frames into one line)."""
    if depth > 1:
        _raise_from_too(depth - 1, exc, cause)
    if cause is None:
        raise exc
    raise exc from cause


def _raise_from_too(depth: int, exc: BaseException, cause: BaseException | None) -> None:
    if depth > 1:
        _raise_from(depth - 1, exc, cause)
    if cause is None:
        raise exc
    raise exc from cause


@dataclass
class Workload:
    """What one agent run is: ``prepare`` builds the runs' inputs (untimed), ``emit`` makes the
    spans of one (timed)."""

    name: str
    description: str
    prepare: Callable[[range], Iterable[Any]]
    emit: Callable[[trace.Tracer, Any], None]


def make_workload(name: str) -> Workload:
    if name == "lean":
        return Workload("lean", "hand-written pydantic-ai-like spans, a handful of attributes each",
                        lambda runs: runs, agent_run)
    if name == "tool-heavy":
        return Workload("tool-heavy", "hand-written: 1 agent, 5 chat, 8 tool spans, a new conversation per run",
                        lambda runs: runs, tool_heavy_run)
    shape = PydanticAIShape()
    return Workload("pydantic-ai", f"spans captured from pydantic-ai-slim {shape.source['pydantic_ai_slim']} "
                    f"({SHAPE.name}), replayed with every attribute and span call",
                    lambda runs: [shape.plan(run) for run in runs], replay_run)


# --- arms: one provider each, built once ----------------------------------------------------------
class Arm:
    """One provider: the SDK with a ``BatchSpanProcessor`` (no-op exporter), then ``extra`` if any."""

    def __init__(self, name: str, extra: SpanProcessor | None, workload: Workload) -> None:
        self.name = name
        self.workload = workload
        self.provider = TracerProvider(resource=Resource.create({"service.name": "bench-support"}))
        self.bsp = BatchSpanProcessor(NoopExporter())
        self.provider.add_span_processor(self.bsp)
        self.extra = extra
        if extra is not None:
            self.provider.add_span_processor(extra)
        self.tracer = self.provider.get_tracer("bench")
        self.next_run = 0

    def shutdown(self) -> None:
        self.provider.shutdown()


VIOLATIONS: list[Any] = []  # the mix is meant to be clean: any violation here is a benchmark bug


OTEL: dict[str, Any] = {}  # --otel: the OTel metrics bridge and a run-verdict log record per run


def otel_outputs() -> dict[str, Any]:
    """A MeterProvider read in memory and a LoggerProvider batching to a no-op exporter."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    class NoLogs(LogRecordExporter):
        def export(self, batch: Any) -> LogRecordExportResult:
            return LogRecordExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    logs = LoggerProvider()
    logs.add_log_record_processor(BatchLogRecordProcessor(NoLogs()))
    return {"meter_provider": MeterProvider(metric_readers=[InMemoryMetricReader()]), "logger_provider": logs}


def make_processor(background: bool = False, variant: str | None = None) -> TrajectoryProcessor:
    """The processor on the benchmark's policy (``variant``: one of :data:`VARIANTS` instead)."""
    policy = POLICY if variant is None else VARIANTS[variant]
    if OTEL:
        policy = policy.model_copy(update={"outputs": policy.outputs.model_copy(update={"evaluation_runs": True})})
        return TrajectoryProcessor(policy, registry=CollectorRegistry(), on_violation=[VIOLATIONS.append],
                                   background=background, **otel_outputs())
    return TrajectoryProcessor(policy, registry=CollectorRegistry(), on_violation=[VIOLATIONS.append],
                               background=background)
