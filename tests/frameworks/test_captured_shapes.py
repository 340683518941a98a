"""Every framework's captured spans, read with zero configuration, live and on replay alike.

``spans/`` holds what each framework emitted for the scenario of :mod:`scenario` (captured by the
end-to-end tests' drivers with the framework versions in the file names; regenerate with
``OTEL_AGENTEVAL_CAPTURE_DIR=$PWD/tests/frameworks/spans bash .ci/frameworks.sh``; the google-adk 1.39.1 file
came from the same scenario run by hand in a google-adk 1.x environment). They run here in the main
environment, compiled and plain, whichever frameworks are installed: the "live" side plays them
as SDK ``ReadableSpan`` objects through a real ``TrajectoryProcessor`` (``on_start`` then
``on_end`` in time order), the replay side through ``replay``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, Status, TraceFlags
from scenario import Run, expected, live, replayed

from otel_agenteval.replay import iter_spans

SPANS = Path(__file__).parent / "spans"

# file -> what the framework records: arguments (False: content capture is off by default),
# model calls and tokens (0 where the instrumentation makes no LLM span for a scripted model)
CASES: dict[str, dict[str, Any]] = {
    "google-adk-2.13.0_default.json": {"arguments": False},
    "google-adk-2.13.0_content.json": {},
    "google-adk-2.13.0_schema1.json": {},
    "google-adk-1.39.1_default.json": {},
    # openinference-instrumentation-google-adk 1.0.5 suppresses ADK 2.13's generate_content spans
    # and its own call_llm wrapper is not reached: no model calls are seen
    "google-adk-2.13.0_openinference.json": {"llm_calls": 0, "tokens": (0, 0)},
    # OpenInference's CrewAI wrappers make no LLM span (that is the model library's instrumentor's job)
    "crewai-1.15.30_openinference-1.1.21_wrappers.json": {"llm_calls": 0, "tokens": (0, 0)},
    "crewai-1.15.30_openinference-1.1.21_events.json": {},
    "smolagents-1.26.0_openinference-0.1.43.json": {},
    "agent-framework-core-1.23.0_default.json": {"arguments": False},
    "agent-framework-core-1.23.0_sensitive.json": {},
    "strands-agents-1.62.0_default.json": {},
    "strands-agents-1.62.0_latest.json": {},
}


def sdk_span(r: Any) -> ReadableSpan:
    """A recorded span as the SDK's own ``ReadableSpan``: what a processor gets in process."""
    ctx = SpanContext(r._context[0], r._context[1], False, TraceFlags(1))
    parent = None if r._parent is None else SpanContext(r._parent[0], r._parent[1], bool(r._parent[2]),
                                                         TraceFlags(1))
    events = [Event(e.name, dict(e.attributes), e.timestamp) for e in r._events]
    return ReadableSpan(name=r._name, context=ctx, parent=parent, resource=Resource(dict(r._resource.attributes)),
                        attributes=dict(r._attributes), events=events, kind=r.kind,
                        status=Status(r._status._status_code, r._status.description), start_time=r._start_time,
                        end_time=r._end_time)


def play_live(path: Path) -> Run:
    run = Run()
    spans = [sdk_span(r) for r in iter_spans([path])]
    timeline = sorted([(s.start_time, 0, i) for i, s in enumerate(spans)] +
                      [(s.end_time, 1, i) for i, s in enumerate(spans)])
    for _, is_end, i in timeline:
        (run.processor.on_end if is_end else run.processor.on_start)(spans[i])  # type: ignore[operator]
    run.processor.shutdown()
    return run


@pytest.mark.parametrize("name", sorted(CASES))
def test_captured_spans_live_and_replayed(name: str) -> None:
    want = expected(**CASES[name])
    path = SPANS / name
    assert live(play_live(path)) == want
    assert replayed(path) == want


def test_every_captured_file_has_a_case() -> None:
    assert sorted(p.name for p in SPANS.glob("*.json")) == sorted(CASES)
