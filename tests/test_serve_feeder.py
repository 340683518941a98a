"""The feeder's clock-driven mode on an injected clock: grace after the root, idle timeout with a
second chance, capacity, late spans; outcomes from the engine."""

from __future__ import annotations

import gc
import random
import threading
import time

import msgspec
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.trace import SpanKind
from test_serve_input import _spans

from otel_agenteval import Policy
from otel_agenteval.cli.build import compiled_modules
from otel_agenteval.engine.engine import Engine
from otel_agenteval.receiver.decoding import from_message
from otel_agenteval.receiver.pipeline import OK, Pipeline
from otel_agenteval.replay.live import LiveFeeder
from otel_agenteval.replay.spanview import STATUS_UNSET, RecordedContext, RecordedResource, RecordedSpan


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
    late = msgspec.structs.replace(trace[1], _context=RecordedContext(trace[1]._context[0], 99))
    feeder.hold([late])  # a new span of the trace, after the play: late
    assert feeder.stats["late"] == 1 and feeder.completed["root_end"] == 1
    feeder.hold(trace[:2])  # a client's retry of spans already played (after a replica's crash): duplicates
    assert feeder.stats["late"] == 1 and feeder.duplicates == 2 and len(done) == 1


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


def test_many_traces_play_in_order_and_the_queues_stay_bounded_by_what_is_held():
    """Thousands of traces through the grace and idle queues, played in the order they came due,
    while a rootless trace comes back every second: played entries are dropped as they go."""
    feeder, now, done = _feeder(max_spans=10_000)
    traces = _recorded(3000)
    (straggler,) = _recorded(1)
    tools = [s for s in straggler if s._parent is not None]
    for i, trace in enumerate(traces):
        now[0] = i / 100  # 100 traces a second: ~500 held in their grace period
        feeder.hold(trace)
        if i % 100 == 0 and i // 100 < len(tools) * 10:
            feeder.hold(tools[: 1 + (i // 100) % 2])  # seen again and again: never idle
        feeder.tick()
        assert feeder.held_traces <= 502
        assert len(feeder._idle) <= 2 * feeder.held_traces + 1024 + 1
    assert feeder.completed["root_end"] == len(traces) - 500 and feeder.completed["idle_timeout"] == 0
    now[0] = 100.0
    assert feeder.tick() == 501  # the last 500 by their root, the straggler by its idle timeout
    assert feeder.completed == {"root_end": 3000, "idle_timeout": 1, "capacity": 0, "memory": 0, "shutdown": 0}
    assert [t.trace_id for t in done[:3000]] == [tr[0]._context[0] for tr in traces]
    assert done[-1].outcome == "incomplete" and feeder.held_traces == 0 and feeder.held_spans == 0


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


class _Calls:
    """Records the engine calls of a play (plain Python build: the compiled feeder takes an Engine)."""

    open_trajectories = 0
    size = bytes = 0  # no pieces of runs held here

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fragments = self  # no pieces of runs held here

    def settle_now(self, idle_ns: int | None = None) -> None:
        pass

    def holds(self, tid: int) -> bool:
        return False

    def start(self, span) -> None:
        self.calls.append(("start", span._context[1]))

    def end(self, span) -> None:
        self.calls.append(("end", span._context[1]))


def _random_trace(rng: random.Random, tid: int) -> tuple[list, dict[int, int | None]]:
    """One trace as a tree: children inside their parents; a child in another service (a remote
    parent) on a skewed clock; some spans sent twice; delivered in any order."""
    spans, parent_of = [], {}
    times: dict[int, tuple[int, int]] = {}  # on one true clock
    skews: dict[int, int] = {}  # each service's clock is off by its own amount
    for n in range(rng.randint(1, 20)):
        sid = 100 + n
        if n == 0:
            parent, start, end = None, 1000, 1000 + rng.randint(0, 500)
        else:
            parent = rng.choice(list(times))
            first, last = times[parent]
            start = rng.randint(first, last)
            end = rng.randint(start, last)
        times[sid] = (start, end)
        other_service = parent is not None and rng.random() < 0.3
        skew = skews[sid] = rng.randint(-50, 50) if other_service else skews.get(parent, 0)
        ctx = None if parent is None else RecordedContext(tid, parent, other_service)
        spans.append(RecordedSpan("s", RecordedContext(tid, sid, False), ctx, SpanKind.INTERNAL, start + skew,
                                  end + skew, STATUS_UNSET, {}, (), RecordedResource({})))
        parent_of[sid] = parent
    sent = spans + rng.sample(spans, rng.randint(0, min(3, len(spans))))
    rng.shuffle(sent)
    return sent, parent_of


@pytest.mark.skipif("replay.live" in compiled_modules(), reason="the compiled feeder takes an Engine only")
def test_a_played_trace_is_one_tree_parents_around_children_whatever_the_order_and_skew():
    rng = random.Random(7)
    for tid in range(1, 401):
        sent, parent_of = _random_trace(rng, tid)
        calls = _Calls()
        feeder = LiveFeeder(calls, 1000, clock=lambda: 0.0, grace_s=0.0)
        feeder.hold(sent)
        feeder.tick()
        at = {call: i for i, call in enumerate(calls.calls)}
        assert len(at) == len(calls.calls) == 2 * len(parent_of)  # each span started and ended once
        assert feeder.duplicates == len(sent) - len(parent_of)
        for sid, parent in parent_of.items():
            assert at["start", sid] < at["end", sid]
            if parent is not None:  # parent around child, across services and skewed clocks too
                assert at["start", parent] < at["start", sid] and at["end", sid] < at["end", parent]
        assert all(s._parent is None or not s._parent[2] for s in sent)  # remote parents made local


def test_a_tick_plays_due_traces_oldest_first_up_to_its_budget_of_spans():
    feeder, now, done = _feeder()
    traces = _recorded(5)  # 3 spans each
    for trace in traces:
        feeder.hold(trace)
        now[0] += 0.1
    now[0] += 6.0
    assert feeder.tick(7) == 3 and feeder.held_spans == 6  # 3, 6, then 9 >= 7: stop
    assert [t.trace_id for t in done] == [t[0]._context[0] for t in traces[:3]]
    assert feeder.tick(0) == 0 and feeder.held_spans == 6
    assert feeder.tick() == 2 and feeder.held_spans == 0


def _pipeline(grace_s: float, policy: Policy | None = None) -> tuple[Pipeline, list[str]]:
    from prometheus_client import CollectorRegistry

    threads: list[str] = []
    pipeline = Pipeline(policy or Policy(), CollectorRegistry(), queue_spans=10_000, grace_s=grace_s, idle_s=30.0,
                        max_held_spans=10_000, log_violations=False,
                        on_trajectory=(lambda t: threads.append(threading.current_thread().name),))
    return pipeline, threads


def test_a_listener_plays_its_own_batch_on_its_own_thread_and_at_most_twice_its_size():
    pipeline, threads = _pipeline(grace_s=0.0)  # due as soon as the root is held
    pipeline.start()
    try:
        traces = _recorded(12)
        first = [s for t in traces[:10] for s in t]  # 30 spans, held while no turn is free
        with pipeline._turn:  # another thread is feeding: the listener only queues
            assert pipeline.submit(first) == OK
        assert threads == [] and pipeline.queue.spans == 30
        listener = threading.Thread(target=lambda: pipeline.submit(traces[10] + traces[11]), name="listener")
        listener.start()
        listener.join()
        # oldest first: it held the 30 queued spans and played until its budget (2 x 6 spans) was
        # spent, 4 traces; its own batch waits in the queue
        assert threads == ["listener"] * 4 and pipeline.queue.spans == 6
        deadline = time.monotonic() + 5
        while len(threads) < 12 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert threads[4:] == ["agenteval-feeder"] * 8  # the feeder thread played the rest
    finally:
        assert pipeline.stop(5)
    assert pipeline.feeder.completed["root_end"] == 12


def test_a_batch_queued_while_the_turn_is_held_is_played_when_it_is_let_go():
    pipeline, threads = _pipeline(grace_s=0.0)  # no feeder thread: only listeners feed
    traces = _recorded(2)
    pipeline._turn.acquire()
    assert pipeline.submit(traces[0]) == OK  # the turn is taken: queued only
    assert threads == []
    pipeline._turn.release()
    assert pipeline.submit(traces[1]) == OK
    assert threads == [threading.current_thread().name] * 2 and pipeline.queue.spans == 0


def test_a_listener_holds_one_batch_at_a_time_so_a_slow_engine_fills_the_queue_not_the_feeder():
    pipeline, threads = _pipeline(grace_s=0.0)  # no feeder thread
    traces = _recorded(10)
    with pipeline._turn:
        for k in range(3):  # 3 batches of 3 traces (9 spans) wait while another thread feeds
            assert pipeline.submit([s for t in traces[3 * k:3 * k + 3] for s in t]) == OK
    assert pipeline.submit(traces[9]) == OK  # 3 spans: a budget of 6
    # the oldest batch held, two of its traces played (6 spans); the rest still queued, and so
    # counted against --queue-spans: a client is refused when the engine falls behind
    assert len(threads) == 2 and pipeline.feeder.held_spans == 3 and pipeline.queue.spans == 21


def test_with_rules_of_its_own_a_policy_is_checked_on_the_feeder_thread_never_on_a_listeners():
    from serve_support import GATE

    GATE.set()  # gate_rule returns at once
    pipeline, threads = _pipeline(grace_s=0.0, policy=Policy.from_dict({"custom_rules": ["serve_support:gate_rule"]}))
    assert not pipeline.listeners_feed
    pipeline.start()
    try:
        listener = threading.Thread(target=lambda: pipeline.submit(_recorded(1)[0]), name="listener")
        listener.start()
        listener.join()
        deadline = time.monotonic() + 5
        while not threads and time.monotonic() < deadline:
            time.sleep(0.01)
        assert threads == ["agenteval-feeder"]
    finally:
        assert pipeline.stop(5)
