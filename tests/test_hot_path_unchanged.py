"""What the processor reports stays the same while its hot path is made cheaper (issue 27).

Two workloads through a real ``TrajectoryProcessor`` on the real SDK: the scenario that fires every
rule (:mod:`serve_support`) and 300 seeded runs of the demo's support agent (the guard asking first,
confirmations, budgets, loops, failed and retried writes). What comes out, the Prometheus exposition
(``_created`` samples aside: they are wall-clock times) and every violation, must equal the golden
file written by the code before the hot-path changes. Regenerate it only for an intended change of
behaviour: ``OTEL_AGENTEVAL_WRITE_GOLDEN=1 pytest tests/test_hot_path_unchanged.py``.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any

from conftest import T0, Harness
from prometheus_client import generate_latest
from serve_support import ALL_RULES, ALL_RULES_POLICY, record_all_rules

from otel_agenteval import Policy
from otel_agenteval.cli.demo_world import DEMO_POLICY, SupportWorld
from otel_agenteval.engine.store import ProcessClock
from otel_agenteval.reading import frameworks

_IDS = re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{16}\b")  # trace and span ids are random
GOLDEN = Path(__file__).parent / "golden" / "hot_path_reports.txt"


def _report(h: Harness) -> list[str]:
    h.processor.force_flush()
    lines = [line for line in generate_latest(h.registry).decode().splitlines()
             if line and not line.startswith("#") and "_created{" not in line and "_created " not in line]
    found = sorted(_IDS.sub("<id>", f"violation {v.rule} {v.severity} agent={v.agent} tool={v.tool} {v.message} "
                                     f"{sorted(v.details.items())}") for v in h.violations)
    return sorted(lines) + found


def _reports(make_processor: Any) -> str:
    everything = make_processor(ALL_RULES_POLICY)
    record_all_rules(everything)
    assert set(everything.rules()) >= ALL_RULES  # the scenario still fires every rule
    demo = make_processor(Policy.from_dict(DEMO_POLICY, "demo policy"))
    world = SupportWorld(demo.tracer, random.Random(7), T0, demo.processor.guard(tracer_provider=demo.provider))
    for _ in range(300):
        world.run()
    return "\n".join(["# every rule", *_report(everything), "# demo, seed 7, 300 runs", *_report(demo)]) + "\n"


def test_reports_equal_the_golden_file(make_processor: Any) -> None:
    got = _reports(make_processor)
    if os.environ.get("OTEL_AGENTEVAL_WRITE_GOLDEN"):
        GOLDEN.write_text(got)
    assert got.splitlines() == GOLDEN.read_text().splitlines()


def test_an_injected_clock_is_read_as_int_ns() -> None:
    clock = ProcessClock(lambda: 1.5e9)  # a float clock: made an int once, where it is wrapped
    assert (clock.now(0), clock.span_now()) == (1_500_000_000, 1_500_000_000)
    assert type(clock.now(0)) is int


def test_unread_verdicts_per_key_set_are_bounded_and_right(monkeypatch: Any) -> None:
    monkeypatch.setattr(frameworks, "_AGENT_KEYS", {})  # a fresh memory, so the bound is reached here
    cache = frameworks._AGENT_KEYS
    for i in range(frameworks.MAX_KEY_SETS + 100):  # more span shapes than are remembered
        assert not frameworks.looks_like_agent_work("GET /x", {"http.route": "/x", f"app.k{i}": 1})
    assert len(cache) == frameworks.MAX_KEY_SETS
    http = {"http.request.method": "GET", "url.full": "http://x"}
    assert [frameworks.looks_like_agent_work("GET", http) for _ in range(2)] == [False, False]
    genai = {"gen_ai.system": "acme", "gen_ai.request.model": "m-1"}
    assert [frameworks.looks_like_agent_work("acme.generate", genai) for _ in range(2)] == [True, True]
    traceloop = {"traceloop.span.kind": "workflow", "gen_ai.system": "acme"}  # known structure
    assert not frameworks.looks_like_agent_work("wf", traceloop)
    assert not frameworks.looks_like_agent_work("haystack.pipeline.run", genai)  # by name, not keys
