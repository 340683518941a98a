"""Shared fixtures: a real TracerProvider with a TrajectoryProcessor on a fresh registry.

Spans are made with a real tracer at explicit times (seconds after ``T0``), so ordering,
durations and TTLs are deterministic. ``Harness`` helpers build the span shapes of
``span-shapes.md``; anything unusual is built with ``start``/``end`` directly.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, Rule, Trajectory, TrajectoryProcessor, Violation

T0 = 1_700_000_000 * 1_000_000_000  # span time origin, ns
SERVICE = "shop"

ISSUE_POLICY = """\
version: 1
tools:
  create_claim: {write: true}
  issue_refund: {write: true}
agents:
  "*":      {budget: {max_steps: 12, max_tokens: 50000, max_cost_usd: 1.0}}
  support:  {budget: {max_steps: 8, max_duration_s: 60}}
pricing:
  gpt-4o: {input_per_mtok: 2.50, output_per_mtok: 10.00}
outcome:
  success_when: [create_claim]
"""

WRITES_ONLY = """\
tools:
  create_claim: {write: true}
  issue_refund: {write: true}
"""


def ns(at: float) -> int:
    """Span time ``at`` seconds after T0, in ns."""
    return T0 + round(at * 1e9)


def hex_span(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x")


def hex_trace(span: ReadableSpan) -> str:
    return format(span.context.trace_id, "032x")


class SpanTimeClock(SpanProcessor):
    """The tests' clock for the processor's expiry: the latest span end time seen, so a test that
    dates its spans drives TTLs with them (the processor's own clock is the process's monotonic one)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def on_end(self, span: ReadableSpan) -> None:
        self.now = max(self.now, span.end_time or 0)


@dataclass
class Harness:
    provider: TracerProvider
    tracer: trace.Tracer
    processor: TrajectoryProcessor
    registry: CollectorRegistry
    trajectories: list[Trajectory] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    clock: SpanTimeClock = field(default_factory=SpanTimeClock)

    def end_only(self, span: ReadableSpan) -> None:
        """Feed a recorded span to the engine alone (no start), as replay's end-only mode does."""
        self.clock.on_end(span)
        self.processor.engine.end(span)

    # --- reading results back ---------------------------------------------------------------
    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def agent_value(self, name: str, agent: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, {"service_name": SERVICE, "agent_name": agent, **labels})

    def rules(self) -> list[str]:
        return [v.rule for v in self.violations]

    # --- raw span building -------------------------------------------------------------------
    def start(self, name: str, parent: Span | SpanContext | None = None, at: float = 0.0,
              attrs: Mapping[str, Any] | None = None) -> Span:
        if parent is None:
            ctx = Context()  # a new trace, whatever is current
        elif isinstance(parent, SpanContext):
            ctx = trace.set_span_in_context(NonRecordingSpan(parent))
        else:
            ctx = trace.set_span_in_context(parent)
        span = self.tracer.start_span(name, context=ctx, attributes=attrs, start_time=ns(at))
        assert isinstance(span, Span)
        return span

    def end(self, span: Span, at: float, attrs: Mapping[str, Any] | None = None,
            events: Iterable[tuple[str, Mapping[str, Any]]] = (), error: str | None = None,
            status: StatusCode | None = None) -> Span:
        if attrs:
            span.set_attributes(dict(attrs))
        for name, ev_attrs in events:
            span.add_event(name, dict(ev_attrs), timestamp=ns(at))
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error or None))
        elif status is not None:
            span.set_status(Status(status))
        span.end(end_time=ns(at))
        return span

    # --- GenAI semconv shapes (pydantic-ai / util-genai) -------------------------------------
    def agent(self, name: str = "support", at: float = 0.0, parent: Span | SpanContext | None = None,
              conv: str | None = None, **extra: Any) -> Span:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        if conv is not None:
            attrs["gen_ai.conversation.id"] = conv
        attrs.update(extra)
        return self.start(f"invoke_agent {name}", parent, at, attrs)

    def tool(self, parent: Span, name: str, args: Any = None, *, at: float, dur: float = 0.1,
             error: str | None = None, result: Any = None, call_id: str | None = None,
             conv: str | None = None, end_attrs: Mapping[str, Any] | None = None) -> Span:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if args is not None:
            attrs["gen_ai.tool.call.arguments"] = args if isinstance(args, str) else json.dumps(args)
        if call_id is not None:
            attrs["gen_ai.tool.call.id"] = call_id
        if conv is not None:
            attrs["gen_ai.conversation.id"] = conv
        span = self.start(f"execute_tool {name}", parent, at, attrs)
        done = dict(end_attrs or {})
        if result is not None:
            done["gen_ai.tool.call.result"] = result
        return self.end(span, at + dur, done, error=error)

    def chat(self, parent: Span, *, at: float, inp: int = 0, out: int = 0, model: str = "gpt-4o",
             dur: float = 0.1, end_attrs: Mapping[str, Any] | None = None) -> Span:
        span = self.start(f"chat {model}", parent, at, {"gen_ai.operation.name": "chat",
                                                        "gen_ai.request.model": model})
        attrs = {"gen_ai.response.model": model, "gen_ai.usage.input_tokens": inp,
                 "gen_ai.usage.output_tokens": out, **(end_attrs or {})}
        return self.end(span, at + dur, attrs)

    def run(self, agent: str = "support", tools: Sequence[tuple[str, Any]] = (), *, at: float = 0.0,
            conv: str | None = None, parent: Span | SpanContext | None = None, step: float = 1.0,
            **end_attrs: Any) -> Span:
        """One complete agent run: tool calls one after the other, then the agent span ends."""
        root = self.agent(agent, at, parent=parent, conv=conv)
        t = at
        for name, args in tools:
            t += step
            self.tool(root, name, args, at=t, conv=conv)
        return self.end(root, t + step, end_attrs or None)


def child_exit_code(pid: int, what: str, timeout_s: float = 20.0) -> int:
    """The exit code of a forked child; the test fails with ``what`` (and the child is killed)
    if it has not exited within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        wpid, status = os.waitpid(pid, os.WNOHANG)
        if wpid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(what)


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterable[None]:
    """A command run in a test (``main([...])``) configures structlog as an application does, onto
    that test's captured stderr: each test leaves the configuration as it found it, so no later
    test's log lines go to a closed stream (counted as callback errors)."""
    configured, config = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**config)
    else:
        structlog.reset_defaults()


@pytest.fixture
def started_receivers() -> Iterable[Callable[..., Any]]:
    """``make(policy=None, **config) -> Receiver`` started on free loopback ports, stopped after the test."""
    from otel_agenteval.receiver import Receiver, ServeConfig  # serve's extras: only the tests that ask

    made: list[Any] = []

    def make(policy: Policy | None = None, **config: Any) -> Any:
        cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0,
                          **{"grace_s": 0.1, "idle_s": 1.0, "log_violations": False, **config})
        r = Receiver(cfg, policy, registry=CollectorRegistry()).start()
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()


@pytest.fixture
def make_processor() -> Iterable[Callable[..., Harness]]:
    """``make_processor(policy_yaml=None, **processor_kwargs) -> Harness`` on a fresh registry."""
    made: list[Harness] = []

    def make(policy_yaml: str | Policy | None = None, *, rules: Sequence[Rule] | None = None,
             on_violation: Sequence[Callable[[Violation], None]] = (),
             on_trajectory: Sequence[Callable[[Trajectory], None]] = (), **processor_kwargs: Any) -> Harness:
        if isinstance(policy_yaml, Policy):
            policy = policy_yaml
        else:
            policy = Policy.from_yaml(policy_yaml or "", "<test>") if policy_yaml else Policy()
        registry = CollectorRegistry()
        trajectories: list[Trajectory] = []
        violations: list[Violation] = []
        clock = SpanTimeClock()
        processor = TrajectoryProcessor(policy, registry=registry,
                                        on_violation=[violations.append, *on_violation],
                                        on_trajectory=[trajectories.append, *on_trajectory], rules=rules, clock=clock,
                                        **processor_kwargs)
        provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        provider.add_span_processor(clock)  # first: the clock has moved when the processor sees the span
        provider.add_span_processor(processor)
        h = Harness(provider, provider.get_tracer("tests"), processor, registry, trajectories, violations, clock)
        made.append(h)
        return h

    yield make
    for h in made:
        h.provider.shutdown()


__all__ = ["ISSUE_POLICY", "SERVICE", "T0", "WRITES_ONLY", "Harness", "child_exit_code", "hex_span", "hex_trace",
           "ns"]
