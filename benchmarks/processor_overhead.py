"""Per-span cost of ``TrajectoryProcessor`` on top of the SDK with a ``BatchSpanProcessor``.

Three arms, each its own ``TracerProvider`` running the *same* span-creation code:

- ``baseline``  BatchSpanProcessor(no-op exporter)
- ``empty``     baseline + a SpanProcessor that does nothing (the noise floor of a 2nd processor)
- ``agenteval`` baseline + TrajectoryProcessor

Many short rounds, arm order rotated and reversed every other round; the median per-span time
of each arm is compared (these machines are noisy). Then the processor alone: recorded spans
replayed straight into ``on_start``/``on_end`` (no SDK, no BatchSpanProcessor), timed by kind.

Three workloads, the same mix (1 agent span, 5 chat spans, 8 tool spans per run; one run in eight
has a failing tool call):

- ``pydantic-ai`` (default) replays the spans real pydantic-ai 2.68 emitted for that run
  (``pydantic_ai_shape.json``, made by ``capture_pydantic_ai_shape.py``): every attribute, set
  at start or later by the same span API calls, in the same order, overlapping tool spans and
  the retried tool's exception included; ids, conversation and order number made per run.
- ``lean`` the hand-written spans of earlier figures (a handful of attributes each).
- ``tool-heavy`` hand-written spans like ``lean``'s, with a new conversation id per run (as in
  production: every run binds a fresh conversation), the mix issue 27 measures.

The ratio is reported as the median over rounds of each arm, and round by round (this round's
agenteval / this round's baseline): median, interquartile range and min-max, and how many rounds
are over the 1.10x target.

With ``--instructions`` it also counts the instructions each arm executes for the same runs under
valgrind's callgrind (deterministic, so the figure to A/B a change by; the wall clock is the one users
feel): baseline and processor arms each in a child process, ``PYTHONHASHSEED=0``.

    python benchmarks/processor_overhead.py [--workload pydantic-ai|lean|tool-heavy] [--rounds N] [--runs-per-round N]
                                            [--json] [--profile] [--instructions]
"""

from __future__ import annotations

import argparse
import contextvars
import cProfile
import functools
import gc
import io
import json
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import time
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
from otel_agenteval.cli.build import build_name

TARGET, GOAL = 1.10, 1.05
SPANS_PER_RUN = 14  # 1 agent + 5 chat + 8 tool
ERROR_EVERY = 8  # one run in eight has a failing tool call

POLICY = Policy.from_dict({
    # send_email is named (a read here), so its name does not make it a write: its constant arguments
    # would repeat across a conversation's runs, and the mix measures the clean path
    "tools": {"create_claim": {"write": True}, "send_email": {}},
    "agents": {"*": {"budget": {"max_steps": 40, "max_llm_calls": 20, "max_tokens": 200_000,
                                "max_cost_usd": 5.0, "max_duration_s": 600}}},
    "pricing": {"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}},
    "outcome": {"success_when": ["create_claim"]},
})

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
        self.per_span_ns: list[float] = []  # wall clock
        self.cpu_per_span_ns: list[float] = []  # process CPU time (all threads): less hurt by other processes

    def round(self, runs: int) -> tuple[float, float]:
        """Run ``runs`` agent runs: per-span wall and CPU ns. Untimed first: the runs' inputs are
        built and the BSP queue is drained."""
        tracer, start, emit = self.tracer, self.next_run, self.workload.emit
        inputs = self.workload.prepare(range(start, start + runs))
        self.bsp.force_flush()
        gc.collect()
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        for run in inputs:
            emit(tracer, run)
        elapsed = time.perf_counter_ns() - t0
        cpu = time.process_time_ns() - c0
        self.next_run = start + runs
        n = runs * SPANS_PER_RUN
        return elapsed / n, cpu / n

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


def make_processor(background: bool = False) -> TrajectoryProcessor:
    if OTEL:
        policy = POLICY.model_copy(update={"outputs": POLICY.outputs.model_copy(update={"evaluation_runs": True})})
        return TrajectoryProcessor(policy, registry=CollectorRegistry(), on_violation=[VIOLATIONS.append],
                                   background=background, **otel_outputs())
    return TrajectoryProcessor(POLICY, registry=CollectorRegistry(), on_violation=[VIOLATIONS.append],
                               background=background)


def measure_arms(workload: Workload, rounds: int, runs: int, warmup: int,
                 gc_off: bool) -> tuple[list[Arm], list[float]]:
    arms = [Arm("baseline", None, workload), Arm("empty", EmptyProcessor(), workload),
            Arm("agenteval", make_processor(), workload)]
    orders = [arms[i:] + arms[:i] for i in range(len(arms))]
    paired: list[float] = []
    if gc_off:
        gc.disable()
    try:
        for r in range(warmup + rounds):
            order = orders[(r // 2) % len(orders)]
            if r % 2:
                order = order[::-1]  # swap order every other round
            got = {arm.name: arm.round(runs) for arm in order}
            if r >= warmup:
                for arm in arms:
                    arm.per_span_ns.append(got[arm.name][0])
                    arm.cpu_per_span_ns.append(got[arm.name][1])
                paired.append(got["agenteval"][0] / got["baseline"][0])
    finally:
        gc.enable()
    for arm in arms:
        arm.shutdown()
    proc = arms[2].extra
    assert isinstance(proc, TrajectoryProcessor)
    stats = proc.stats()
    expected = (warmup + rounds) * runs
    if stats["spans"]["agent"] != expected or sum(stats["errors"].values()) or VIOLATIONS:
        raise SystemExit(f"processor did not see the mix as expected: {stats}, {len(VIOLATIONS)} violations")
    return arms, paired


# --- the processor alone --------------------------------------------------------------------------
def record(workload: Workload, runs: int) -> list[tuple[str, Any]]:
    rec = Recorder()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-support"}))
    provider.add_span_processor(rec)
    tracer = provider.get_tracer("bench")
    for run in workload.prepare(range(1_000_000, 1_000_000 + runs)):
        workload.emit(tracer, run)
    return rec.calls


def _kind(span: Any) -> str:
    return {"invoke_agent": "agent", "chat": "chat", "execute_tool": "tool"}[span.attributes["gen_ai.operation.name"]]


def replay(calls: list[tuple[str, Any]], proc: TrajectoryProcessor) -> int:
    on_start, on_end = proc.on_start, proc.on_end
    t0 = time.perf_counter_ns()
    for phase, span in calls:
        if phase == "start":
            on_start(span)
        else:
            on_end(span)
    return time.perf_counter_ns() - t0


def replay_by_kind(calls: list[tuple[str, Any]], proc: TrajectoryProcessor) -> dict[tuple[str, str], int]:
    """ns spent per (phase, kind), each call timed on its own, minus the cost of the timer."""
    clock = time.perf_counter_ns
    kinds = [(phase, _kind(span)) for phase, span in calls]
    t_empty = min(-(clock() - clock()) for _ in range(2000))
    out: dict[tuple[str, str], int] = {}
    on_start, on_end = proc.on_start, proc.on_end
    for (phase, span), key in zip(calls, kinds):
        fn = on_start if phase == "start" else on_end
        t0 = clock()
        fn(span)
        dt = clock() - t0 - t_empty
        out[key] = out.get(key, 0) + dt
    return out


def measure_alone(workload: Workload, runs: int, repeats: int) -> dict[str, Any]:
    calls = record(workload, runs)
    spans = len(calls) // 2
    gc.collect()
    gc.freeze()  # the recorded spans are not the processor's garbage: keep collections off them
    try:
        times = []
        for _ in range(repeats):
            gc.collect()
            times.append(replay(calls, make_processor()))
        gc.collect()
        by_kind = replay_by_kind(calls, make_processor())
    finally:
        gc.unfreeze()
    best = statistics.median(times)
    counts = {"agent": runs, "chat": 5 * runs, "tool": 8 * runs}
    return {
        "method": "recorded SDK spans replayed into on_start/on_end directly (no SDK, no BatchSpanProcessor); "
                  "fresh processor per pass, GC on, recorded spans gc.freeze()d",
        "spans": spans,
        "us_per_span": best / spans / 1e3,
        "spans_per_s": spans / (best / 1e9),
        "us_per_span_by_kind": {
            f"{phase}:{kind}": ns / counts[kind] / 1e3 for (phase, kind), ns in sorted(by_kind.items())
        },
    }


def profile_alone(workload: Workload, runs: int, top: int) -> str:
    calls = record(workload, runs)
    proc = make_processor()
    prof = cProfile.Profile()
    prof.enable()
    replay(calls, proc)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def callgrind_arm(name: str, workload: Workload, runs: int) -> None:
    """Run one arm for valgrind: ``runs`` warm-up runs, then ``runs`` runs inside ``functools.reduce``,
    the function to toggle collection on (``--collect-atstart=no --toggle-collect=functools_reduce``).
    The measured runs' inputs are built before, outside it."""
    extra = {"baseline": None, "empty": EmptyProcessor(), "agenteval": make_processor()}[name]
    arm = Arm(name, extra, workload)
    emit = workload.emit
    for run in workload.prepare(range(runs)):
        emit(arm.tracer, run)
    inputs = workload.prepare(range(runs, 2 * runs))
    arm.bsp.force_flush()
    gc.collect()

    def measured(_: Any, __: Any) -> None:
        for run in inputs:
            emit(arm.tracer, run)

    functools.reduce(measured, [0], None)
    arm.shutdown()


def instruction_counts(workload: str, runs: int) -> dict[str, Any]:
    """Instructions each arm executes for ``runs`` measured runs (after as many warm-up runs), counted
    by callgrind in a child process per arm (:func:`callgrind_arm`), and their ratio."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions: valgrind is not installed (apt-get install valgrind)")
    counts: dict[str, int] = {}
    for arm in ("baseline", "agenteval"):
        cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
               "--callgrind-out-file=/dev/null", sys.executable, __file__, "--workload", workload,
               "--callgrind-arm", arm, "--runs-per-round", str(runs)]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
                              check=False)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"--instructions: callgrind counted nothing for the {arm} arm "
                             f"(exit {done.returncode}): {done.stderr[-800:]}")
        counts[arm] = int(found.group(1))
    spans = runs * SPANS_PER_RUN
    return {"runs": runs, "spans": spans, "baseline": counts["baseline"], "agenteval": counts["agenteval"],
            "per_span": {arm: n / spans for arm, n in counts.items()},
            "processor_per_span": (counts["agenteval"] - counts["baseline"]) / spans,
            "ratio": counts["agenteval"] / counts["baseline"]}


# --- report ---------------------------------------------------------------------------------------
def measure_noop(workload: Workload, runs: int, repeats: int) -> float:
    """µs per span of the same runs against the OTel API's no-op tracer: what the workload itself
    costs (building nothing, just the calls and the context switches), inside every arm's figure."""
    tracer, emit = trace.NoOpTracer(), workload.emit
    times = []
    for _ in range(repeats):
        inputs = workload.prepare(range(runs))
        gc.collect()
        t0 = time.perf_counter_ns()
        for run in inputs:
            emit(tracer, run)
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / (runs * SPANS_PER_RUN) / 1e3


def summarise(arms: list[Arm], paired: list[float], alone: dict[str, Any], noop_us: float,
              args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    med = {a.name: statistics.median(a.per_span_ns) / 1e3 for a in arms}
    cpu = {a.name: statistics.median(a.cpu_per_span_ns) / 1e3 for a in arms}
    q = {a.name: statistics.quantiles(a.per_span_ns, n=4) for a in arms}
    quartiles = statistics.quantiles(paired, n=4)
    return {
        "workload": args.workload,
        "workload_description": arms[0].workload.description,
        "python": platform.python_version(),
        "build": build_name(),
        "rounds": args.rounds, "runs_per_round": args.runs_per_round, "warmup_rounds": args.warmup,
        "spans_per_run": SPANS_PER_RUN, "gc": "disabled during rounds" if args.gc_off else "enabled (collected before each round)",
        "us_per_span": med,
        "us_per_span_iqr": {k: [v[0] / 1e3, v[2] / 1e3] for k, v in q.items()},
        "ratio": med["agenteval"] / med["baseline"],
        "ratio_empty": med["empty"] / med["baseline"],
        "ratio_paired_median": statistics.median(paired),
        "ratio_paired_iqr": [quartiles[0], quartiles[2]],
        "ratio_paired_range": [min(paired), max(paired)],
        "ratio_paired_rounds": paired,
        "rounds_over_target": sum(r > TARGET for r in paired),
        "cpu_us_per_span": cpu,
        "ratio_cpu": cpu["agenteval"] / cpu["baseline"],
        "added_us_per_span": med["agenteval"] - med["baseline"],
        "noop_tracer_us_per_span": noop_us,
        "processor_alone": alone,
        "seconds": seconds,
    }


def print_table(s: dict[str, Any]) -> None:
    print(f"workload {s['workload']}: {s['workload_description']}")
    print(f"python {s['python']}, otel-agenteval {s['build']}, {s['rounds']} rounds x {s['runs_per_round']} runs x {s['spans_per_run']} spans "
          f"(+{s['warmup_rounds']} warm-up rounds), GC {s['gc']}")
    print(f"{'arm':<34}{'us/span median':>15}{'IQR':>16}{'ratio':>8}{'cpu us/span':>13}{'ratio':>8}")
    base = s["us_per_span"]["baseline"]
    labels = {"baseline": "SDK + BatchSpanProcessor(no-op)", "empty": "  + empty SpanProcessor",
              "agenteval": "  + TrajectoryProcessor"}
    for name, label in labels.items():
        lo, hi = s["us_per_span_iqr"][name]
        us = s["us_per_span"][name]
        cpu, cpu_base = s["cpu_us_per_span"][name], s["cpu_us_per_span"]["baseline"]
        print(f"{label:<34}{us:>15.2f}{f'{lo:.2f}-{hi:.2f}':>16}{us / base:>7.3f}x{cpu:>13.2f}{cpu / cpu_base:>7.3f}x")
    print(f"{'(same runs, API no-op tracer)':<34}{s['noop_tracer_us_per_span']:>15.2f}")
    a = s["processor_alone"]
    print(f"\nprocessor alone ({a['method']}):")
    print(f"  {a['us_per_span']:.2f} us/span, {a['spans_per_s']:,.0f} spans/s over {a['spans']} spans")
    print("  by call and kind (us per span of that kind): " +
          ", ".join(f"{k} {v:.2f}" for k, v in a["us_per_span_by_kind"].items()))
    lo, hi = s["ratio_paired_iqr"]
    print(f"\npaired per-round ratio: median {s['ratio_paired_median']:.3f}x, IQR {lo:.3f}-{hi:.3f}x, "
          f"range {s['ratio_paired_range'][0]:.3f}-{s['ratio_paired_range'][1]:.3f}x over {len(s['ratio_paired_rounds'])} "
          f"rounds, {s['rounds_over_target']} over {TARGET:.2f}x")
    print(f"empty second processor: {s['ratio_empty']:.3f}x; added {s['added_us_per_span']:.2f} us/span; "
          f"{s['seconds']:.0f} s")
    print(f"overhead ratio: {s['ratio']:.2f}x (target <= {TARGET:.2f}x, goal {GOAL:.2f}x)")
    ir = s.get("instructions")
    if ir:
        print(f"instructions (callgrind, {ir['runs']} runs = {ir['spans']} spans, PYTHONHASHSEED=0): baseline "
              f"{ir['baseline'] / 1e6:.1f}M, with the processor {ir['agenteval'] / 1e6:.1f}M: ratio {ir['ratio']:.3f}x "
              f"({ir['processor_per_span'] / 1e3:.1f}k added a span)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=("pydantic-ai", "lean", "tool-heavy"), default="pydantic-ai",
                   help="the spans of a run: replayed from a real pydantic-ai capture (default), the lean "
                        "hand-written ones of earlier figures, or tool-heavy (a new conversation per run)")
    p.add_argument("--rounds", type=int, default=30, help="measured rounds per arm (default 30)")
    p.add_argument("--runs-per-round", type=int, default=200, help="agent runs per round (default 200, 14 spans each)")
    p.add_argument("--warmup", type=int, default=4, help="rounds run first and discarded (default 4)")
    p.add_argument("--gc-off", action="store_true", help="disable the garbage collector during rounds")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--otel", action="store_true",
                   help="the processor with meter_provider and logger_provider (evaluation_runs: true)")
    p.add_argument("--profile", action="store_true", help="also cProfile the processor alone and print the top functions")
    p.add_argument("--instructions", action="store_true",
                   help="also count each arm's instructions with valgrind's callgrind (runs-per-round runs)")
    p.add_argument("--callgrind-arm", choices=("baseline", "empty", "agenteval"),
                   help="only run this arm for valgrind's instruction count (see benchmarks/README.md)")
    args = p.parse_args(argv)
    if args.otel:
        OTEL.update(on=True)
    workload = make_workload(args.workload)
    if args.callgrind_arm:
        callgrind_arm(args.callgrind_arm, workload, args.runs_per_round)
        return 0
    if args.rounds < 2 or args.runs_per_round < 1 or args.warmup < 0:
        p.error("--rounds must be >= 2, --runs-per-round >= 1, --warmup >= 0")
    t0 = time.perf_counter()
    arms, paired = measure_arms(workload, args.rounds, args.runs_per_round, args.warmup, args.gc_off)
    alone = measure_alone(workload, runs=1000, repeats=7)
    noop_us = measure_noop(workload, runs=args.runs_per_round, repeats=7)
    s = summarise(arms, paired, alone, noop_us, args, time.perf_counter() - t0)
    if args.instructions:
        s["instructions"] = instruction_counts(args.workload, args.runs_per_round)
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        print()
    else:
        print_table(s)
    if args.profile:
        print(profile_alone(workload, runs=2000, top=30), file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
