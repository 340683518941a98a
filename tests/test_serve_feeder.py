"""The feeder's clock-driven mode on an injected clock: grace after the root, idle timeout with a
second chance, capacity, late spans; outcomes from the engine."""

from __future__ import annotations

import gc

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from test_serve_input import _spans

from otel_agenteval import Policy
from otel_agenteval.engine import Engine
from otel_agenteval.receiver.decoding import from_message
from otel_agenteval.replay.live import LiveFeeder


def _recorded(n_runs: int):
    """RecordedSpans of ``n_runs`` runs (agent root + 2 tools each), grouped by trace."""
    spans = from_message(encode_spans(_spans(n_runs))).spans
    by_trace: dict[int, list] = {}
    for s in spans:
        by_trace.setdefault(s._context[0], []).append(s)
    return list(by_trace.values())


def _feeder(max_spans: int = 1000):
    now = [0.0]
    done = []
    engine = Engine(Policy(), on_finish=(done.append,), log_violations=False)
    return LiveFeeder(engine, max_spans, clock=lambda: now[0], grace_s=5.0, idle_s=30.0), now, done


def test_a_trace_plays_a_grace_period_after_its_root():
    feeder, now, done = _feeder()
    (trace,) = _recorded(1)
    root = [s for s in trace if s._parent is None]
    feeder.hold(root)  # the root's batch first
    now[0] = 3.0
    feeder.hold([s for s in trace if s._parent is not None])  # the children within the grace
    now[0] = 4.9
    assert feeder.tick() == 0 and feeder.held_spans == 3
    now[0] = 5.0
    assert feeder.tick() == 1 and feeder.held_spans == 0
    assert [(t.outcome, len(t.steps)) for t in done] == [("unknown", 2)]
    feeder.hold(trace[:1])  # again, after the play: late
    assert feeder.stats["late"] == 1 and feeder.completed["root_end"] == 1


def test_a_rootless_trace_waits_for_its_idle_timeout_with_a_second_chance():
    feeder, now, done = _feeder()
    (trace,) = _recorded(1)
    children = [s for s in trace if s._parent is not None]
    feeder.hold(children[:1])
    now[0] = 20.0
    feeder.hold(children[1:])  # seen again: its idle time starts over
    now[0] = 31.0
    assert feeder.tick() == 0
    now[0] = 50.0
    assert feeder.tick() == 1
    assert feeder.completed["idle_timeout"] == 1
    assert [(t.outcome, len(t.steps)) for t in done] == [("incomplete", 2)]  # one run, kept by trace


def test_past_its_bound_the_oldest_trace_plays_at_once():
    feeder, now, done = _feeder(max_spans=4)
    first, second = _recorded(2)
    feeder.hold([s for s in first if s._parent is not None])
    feeder.hold([s for s in second if s._parent is not None])  # 4 held: at the bound
    assert feeder.completed["capacity"] == 0
    feeder.hold([s for s in second if s._parent is None])  # 5: the oldest trace goes
    assert feeder.completed["capacity"] == 1 and feeder.held_spans == 3
    assert [t.outcome for t in done] == ["incomplete"]
    feeder.close_held()  # shutdown: the rooted one plays as it is
    assert feeder.completed["shutdown"] == 1 and [t.outcome for t in done] == ["incomplete", "unknown"]


def test_a_played_trace_leaves_nothing_to_the_cyclic_gc():
    """The nodes a play links parent to child are freed when it ends, not at the next collection
    (which would keep every span of the trace alive until then)."""
    feeder, now, done = _feeder()
    traces = _recorded(3)
    gc.collect()
    gc.disable()
    try:
        for trace in traces:
            feeder.hold(trace)
        now[0] = 5.0
        assert feeder.tick() == 3 and len(done) == 3
        left = [o for o in gc.get_objects() if type(o).__name__ == "_Node"]
    finally:
        gc.enable()
    assert left == []
