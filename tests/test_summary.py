"""RunSummary: exact percentiles in constant memory."""

from __future__ import annotations

import random

from otel_agenteval.model.summary import RunSummary, counted_percentile, percentile
from otel_agenteval.model.trajectory import Trajectory


def test_counted_percentiles_equal_the_list_ones():
    rng = random.Random(3)
    values = [rng.choice([1, 2, 3, 5, 8, 13, 21]) for _ in range(997)]
    from collections import Counter

    counts = Counter(values)
    for q in (1, 50, 90, 95, 99, 100):
        assert counted_percentile(counts, q) == percentile([float(v) for v in values], q)
    assert counted_percentile(Counter(), 50) == 0.0


def test_summary_memory_is_bounded_by_distinct_step_counts():
    s = RunSummary()
    for i in range(10_000):
        t = Trajectory(key=i, trace_id=i, service_name="s", started_ns=0)
        t.tool_calls = i % 7
        t.outcome = "success"
        s.add_trajectory(t)
    assert len(s.steps) == 7
    d = s.to_dict()
    assert d["runs"] == 10_000 and d["steps"]["max"] == 6.0 and d["steps"]["p50"] == 3.0
