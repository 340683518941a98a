"""A run is bound to its case wherever the app names it: on the run's own root, on the app's span
around a framework's agent run (its local root or any ancestor), or in OTel baggage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from otel_agenteval import Trajectory, TrajectoryProcessor
from otel_agenteval.scoring.bind import case_id_of, trial_of

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.call.arguments": '{"order_id": "1"}'}


@pytest.fixture
def app() -> Iterator[tuple[trace.Tracer, list[Trajectory]]]:
    runs: list[Trajectory] = []
    provider = TracerProvider()
    provider.add_span_processor(TrajectoryProcessor(registry=CollectorRegistry(), on_trajectory=[runs.append]))
    yield provider.get_tracer("app"), runs
    provider.shutdown()


def _agent_run(tracer: trace.Tracer, **agent_attrs: Any) -> None:
    """A framework's agent run: its own agent span, one tool call."""
    with tracer.start_as_current_span("invoke_agent support", attributes={**AGENT, **agent_attrs}), \
            tracer.start_as_current_span("execute_tool lookup_order", attributes=TOOL):
        pass


def _bound(runs: list[Trajectory]) -> list[tuple[str | None, int | None]]:
    return [(case_id_of(t), trial_of(t)) for t in runs]


def test_the_app_s_own_root_names_the_case(app: tuple[trace.Tracer, list[Trajectory]]) -> None:
    tracer, runs = app
    with tracer.start_as_current_span("eval", attributes={"agenteval.case.id": "refund", "agenteval.trial": 2}):
        _agent_run(tracer)
    with tracer.start_as_current_span("eval") as root:  # named after the span started, before the run
        root.set_attribute("agenteval.case.id", "claim")
        _agent_run(tracer)
    assert _bound(runs) == [("refund", 2), ("claim", None)]


def test_the_nearest_ancestor_that_names_a_case_wins(app: tuple[trace.Tracer, list[Trajectory]]) -> None:
    tracer, runs = app
    with tracer.start_as_current_span("suite", attributes={"agenteval.case.id": "suite-default"}):
        for case in ("refund", "claim"):
            with tracer.start_as_current_span("case", attributes={"agenteval.case.id": case, "agenteval.trial": 1}), \
                    tracer.start_as_current_span("http"):
                _agent_run(tracer)
        _agent_run(tracer, **{"agenteval.case.id": "own"})  # the run's own root first
        _agent_run(tracer)  # the case spans have ended: the root's
    assert _bound(runs) == [("refund", 1), ("claim", 1), ("own", None), ("suite-default", None)]


def test_baggage_names_the_case(app: tuple[trace.Tracer, list[Trajectory]]) -> None:
    tracer, runs = app
    token = context.attach(baggage.set_baggage("agenteval.trial", "3", baggage.set_baggage("agenteval.case.id", "refund")))
    try:
        _agent_run(tracer)  # an agent run at the root
        with tracer.start_as_current_span("request"):
            _agent_run(tracer)  # under a span that names nothing
    finally:
        context.detach(token)
    _agent_run(tracer)
    assert _bound(runs) == [("refund", 3), ("refund", 3), (None, None)]


def test_baggage_is_read_only_for_whoever_takes_finished_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent span's start reads OTel baggage for a case id only when finished runs go somewhere
    (``on_trajectory``: scoring); a processor that only counts and alerts skips it."""
    reads: list[Any] = []
    real = baggage.get_all
    monkeypatch.setattr(baggage, "get_all", lambda ctx=None: reads.append(ctx) or real(ctx))
    for takes, expected in (([], 0), ([lambda t: None], 2)):
        reads.clear()
        provider = TracerProvider()
        provider.add_span_processor(TrajectoryProcessor(registry=CollectorRegistry(), on_trajectory=takes))
        tracer = provider.get_tracer("app")
        _agent_run(tracer)
        _agent_run(tracer)
        provider.shutdown()
        assert len(reads) == expected
