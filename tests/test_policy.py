"""The policy: the issue's file loads and means what it says; bad files fail naming the setting."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ISSUE_POLICY
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from otel_agenteval import Policy, PolicyError, TrajectoryProcessor
from otel_agenteval.policy.policy import Budget, Price


def test_issue_policy_loads_and_means_what_it_says(tmp_path: Path) -> None:
    path = tmp_path / "agenteval.yaml"
    path.write_text(ISSUE_POLICY)
    p = Policy.from_file(path)
    assert p == Policy.from_yaml(ISSUE_POLICY)
    assert p.write_tools == frozenset({"create_claim", "issue_refund"})
    assert (p.is_write("create_claim"), p.is_write("lookup_order")) == (True, False)
    star = Budget(max_steps=12, max_tokens=50000, max_cost_usd=1.0)
    assert p.budget_for("support") == Budget(max_steps=8, max_tokens=50000, max_cost_usd=1.0, max_duration_s=60)
    assert p.budget_for("billing") == star
    assert p.budget_for("unknown") == star
    assert p.budget_for("*") == star
    gpt4o = Price(input_per_mtok=2.5, output_per_mtok=10.0)
    assert [p.price_for(m) for m in ("gpt-4o", "gpt-4o-2024-08-06", "gpt-4", "claude-3", None)] == [
        gpt4o, gpt4o, None, None, None]
    assert p.outcome.success_when == ["create_claim"]
    assert p.limits.max_open_trajectories > 0 and p.limits.trajectory_ttl_s > 0  # defaults kept


def test_longest_price_prefix_wins() -> None:
    p = Policy.from_dict({"pricing": {"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10},
                                      "gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}})
    assert p.price_for("gpt-4o-mini-2024-07-18") == Price(input_per_mtok=0.15, output_per_mtok=0.6)
    assert p.price_for("gpt-4o-2024-08-06") == Price(input_per_mtok=2.5, output_per_mtok=10)


def test_agent_budget_without_star() -> None:
    p = Policy.from_dict({"agents": {"support": {"budget": {"max_steps": 3}}}})
    assert (p.budget_for("support"), p.budget_for("other")) == (Budget(max_steps=3), Budget())


def errors_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        Policy.from_yaml(text, "agenteval.yaml")
    assert str(info.value).startswith("agenteval.yaml: invalid policy")
    # every error names its line in the file; the line itself is checked in test_check_policy.py
    assert all(re.search(r" \(line \d+\)$", e) for e in info.value.errors if "not valid YAML" not in e and "(top level)" not in e)
    return [re.sub(r" \(line \d+\)$", "", e) for e in info.value.errors]


@pytest.mark.parametrize("text,path", [
    ("tool: {create_claim: {write: true}}", "tool"),
    ("tools: {create_claim: {writes: true}}", "tools.create_claim.writes"),
    ("agents: {support: {budjet: {max_steps: 3}}}", "agents.support.budjet"),
    ("agents: {'*': {budget: {max_stepz: 3}}}", "agents.*.budget.max_stepz"),
    ("pricing: {gpt-4o: {input_per_mtok: 1, output_per_mtok: 2, cached: 1}}", "pricing.gpt-4o.cached"),
    ("outcome: {success_if: [create_claim]}", "outcome.success_if"),
    ("limits: {max_open: 5}", "limits.max_open"),
])
def test_unknown_keys_are_errors_with_their_path(text: str, path: str) -> None:
    assert errors_of(text) == [f"{path}: unknown key (check the spelling)"]


@pytest.mark.parametrize("text,expected", [
    ("agents: {'*': {budget: {max_steps: 0}}}", "agents.*.budget.max_steps: must be > 0"),
    ("agents: {support: {budget: {max_duration_s: -1}}}", "agents.support.budget.max_duration_s: must be > 0"),
    ("pricing: {gpt-4o: {input_per_mtok: -1, output_per_mtok: 2}}", "pricing.gpt-4o.input_per_mtok: must be >= 0"),
    ("limits: {max_open_trajectories: 0}", "limits.max_open_trajectories: must be > 0"),
])
def test_bad_values_are_errors_with_their_path(text: str, expected: str) -> None:
    assert errors_of(text) == [expected]


@pytest.mark.parametrize("text,path", [
    ("version: 2", "version"),
    ("agents: {support: {budget: {max_steps: many}}}", "agents.support.budget.max_steps"),
    ("tools: {create_claim: {write: maybe}}", "tools.create_claim.write"),
    ("pricing: {gpt-4o: {input_per_mtok: 1}}", "pricing.gpt-4o.output_per_mtok"),
    ("outcome: {success_when: create_claim}", "outcome.success_when"),
])
def test_wrong_types_name_the_setting(text: str, path: str) -> None:
    (line,) = errors_of(text)
    assert line.startswith(f"{path}: ")


def test_every_error_reported_at_once() -> None:
    lines = errors_of("agents: {'*': {budget: {max_steps: 0, max_tokens: 0}}}\nlimits: {bogus: 1}")
    assert sorted(lines) == ["agents.*.budget.max_steps: must be > 0", "agents.*.budget.max_tokens: must be > 0",
                             "limits.bogus: unknown key (check the spelling)"]


def test_yaml_syntax_error_names_the_line() -> None:
    (line,) = errors_of("version: 1\ntools:\n  create_claim: {write: true\n")
    assert line.startswith("line ") and "not valid YAML" in line


def test_top_level_must_be_a_mapping() -> None:
    assert errors_of("- create_claim\n") == ["(top level): must be a mapping, got list"]


def test_missing_file_error_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "agenteval.yaml"
    with pytest.raises(PolicyError) as info:
        Policy.from_file(missing)
    assert str(missing) in str(info.value)
    assert "cannot read" in str(info.value) and "No such file" in str(info.value)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("agents: {'*': {budget: {max_steps: 0}}}\n")
    with pytest.raises(PolicyError) as info:
        Policy.from_file(path)
    assert str(info.value) == f"{path}: invalid policy\n  agents.*.budget.max_steps: must be > 0 (line 1)"


@pytest.mark.parametrize("text", ["", "version: 1\n", "# only a comment\n"])
def test_empty_policy_is_the_default(text: str) -> None:
    assert Policy.from_yaml(text) == Policy()


def test_defaults_usable_with_no_file(make_processor: Any) -> None:
    p = Policy()
    assert (p.write_tools, p.budget_for("support"), p.price_for("gpt-4o"), p.outcome.success_when) == (
        frozenset(), Budget(), None, [])
    processor = TrajectoryProcessor(registry=CollectorRegistry())
    assert processor.policy == Policy()
    h = make_processor()  # no policy at all
    h.run("support", [("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})])
    assert [(t.agent_name, t.tool_calls, t.outcome) for t in h.trajectories] == [("support", 2, "unknown")]
    # no write tools declared: create_claim is a write by its name (issue 26), a warning until declared
    assert [(v.rule, v.severity, v.tool) for v in h.violations] == [("duplicate_write", "warning", "create_claim")]


def test_policy_is_frozen() -> None:
    p = Policy.from_yaml(ISSUE_POLICY)
    with pytest.raises(ValidationError, match="frozen"):
        p.tools = {}  # type: ignore[misc]
