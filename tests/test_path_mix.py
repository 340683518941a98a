"""The path mix: runs that called each tool (next to the runs total), the policy's expected tools,
runs that looped on one call."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest

from otel_agenteval import Policy, PolicyError

POLICY = """\
tools:
  coverage_rules: {expected: true}
  route: {}
outputs: {loop_repeats: 3}
"""


def test_runs_with_tool_counts_each_tool_once_per_run(make_processor: Any) -> None:
    h = make_processor(POLICY)
    h.run("intake", [("coverage_rules", {"p": 1}), ("route", {"to": "a"}), ("route", {"to": "b"})])
    h.run("intake", [("route", {"to": "a"})], at=10)  # the harbourline release: no coverage check
    assert {tool: h.agent_value("agenteval_runs_with_tool_total", "intake", tool=tool)
            for tool in ("coverage_rules", "route")} == {"coverage_rules": 1.0, "route": 2.0}
    assert h.agent_value("agenteval_trajectories_total", "intake", outcome="unknown") == 2.0
    assert h.value("agenteval_policy_expected_tool", tool="coverage_rules") == 1.0
    assert h.value("agenteval_policy_expected_tool", tool="route") is None


def test_an_expected_tool_is_exported_at_zero_from_the_agents_first_run(make_processor: Any) -> None:
    h = make_processor(POLICY)
    h.run("intake", [("route", {"to": "a"})])
    assert h.agent_value("agenteval_runs_with_tool_total", "intake", tool="coverage_rules") == 0.0


def test_loops_count_runs_that_repeat_one_call(make_processor: Any) -> None:
    h = make_processor(POLICY)
    h.run("support", [("lookup", {"id": 1})] * 3 + [("lookup", {"id": 2})])  # the same call three times
    h.run("support", [("lookup", {"id": i % 2}) for i in range(4)], at=20)  # two calls, twice each: no loop
    assert h.agent_value("agenteval_loops_total", "support", tool="lookup") == 1.0
    assert h.agent_value("agenteval_redundant_calls_total", "support", tool="lookup") == 4.0  # 2 repeats in each run


def test_no_expected_tools_no_gauge(make_processor: Any) -> None:
    h = make_processor("tools:\n  route: {}\n")
    h.run("intake", [("route", {})])
    assert b"agenteval_policy_expected_tool" not in generate_latest(h.registry)


@pytest.mark.parametrize(("text", "error"), [
    ("tools:\n  coverage_rules: {expected: \"1\"}\n", "tools.coverage_rules.expected: Input should be a valid boolean"),
    ("outputs: {loop_repeats: 1}\n", "outputs.loop_repeats: must be >= 2"),
])
def test_settings_are_validated(text: str, error: str) -> None:
    with pytest.raises(PolicyError, match=error):
        Policy.from_yaml(text)
