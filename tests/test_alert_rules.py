"""The shipped alert rules: valid, unit-tested with promtool, and the unit tests can fail.

``promtool`` comes from the Debian ``prometheus`` package (``.ci/install-tools.sh``). Without
it these tests skip, except under ``CI`` where a missing tool is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

RULES_DIR = Path(__file__).resolve().parent.parent / "deploy" / "prometheus" / "rules"
RULES = RULES_DIR / "agenteval.rules.yml"
# the daily file holds the alerts that compare with yesterday, evaluated every 10m for speed
UNIT_TESTS = (RULES_DIR / "agenteval.rules.test.yml", RULES_DIR / "agenteval.rules.daily.test.yml")


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool not found on PATH under CI: .ci/install-tools.sh should have installed it")
        pytest.skip("promtool not installed (apt-get install prometheus, or run .ci/install-tools.sh)")
    return path


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, check=False, capture_output=True, text=True, timeout=120)


def _rules() -> dict[str, Any]:
    return yaml.safe_load(RULES.read_text())


def _alerts() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in _rules()["groups"] for r in g["rules"] if "alert" in r}


def _unit_tests(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _groups() -> list[dict[str, Any]]:
    return [g for path in UNIT_TESTS for g in _unit_tests(path)["tests"]]


def test_promtool_check_rules(promtool: str) -> None:
    out = _run(promtool, "check", "rules", RULES.name, cwd=RULES_DIR)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in out.stdout


def test_promtool_unit_tests_pass(promtool: str) -> None:
    out = _run(promtool, "test", "rules", *(p.name for p in UNIT_TESTS), cwd=RULES_DIR)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("SUCCESS") == len(UNIT_TESTS)


def test_every_alert_has_a_case_that_fires_and_one_that_must_not() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for group in _groups():
        for case in group.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    alerts = set(_alerts())
    assert alerts - fires == set(), "alerts without a firing case"
    assert alerts - quiet == set(), "alerts without a case that must not fire"
    assert (fires | quiet) - alerts == set(), "unit tests name alerts that do not exist"


def test_critical_violations_page_without_for_on_severity_not_rule_names() -> None:
    alert = _alerts()["AgentCriticalViolation"]
    assert "for" not in alert
    assert alert["labels"]["severity"] == "critical"
    expr = alert["expr"]
    assert expr.count('severity="critical"') == 3
    assert "rule=" not in expr  # new critical rules page without editing the alert
    assert "offset 5m" in expr and "unless" in expr  # catches a series born at 1


def test_every_alert_has_a_summary_description_and_known_severity() -> None:
    for name, alert in _alerts().items():
        severity = alert["labels"]["severity"]
        if severity == "{{ $labels.severity }}":  # the violation's own (critical or warning), kept by every branch
            assert alert["expr"].count(", severity) (") == alert["expr"].count("sum by ("), name
        else:
            assert severity in ("critical", "warning"), name
        assert alert["annotations"]["summary"] and alert["annotations"]["description"], name


# --- the unit tests can fail: a deliberately broken copy of a rule fails them ------------------

def _replace(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def mutate(rule: dict[str, Any]) -> None:
        assert old in rule["expr"], f"mutation target {old!r} not in the expression"
        rule["expr"] = rule["expr"].replace(old, new)
    return mutate


def _set(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    def mutate(rule: dict[str, Any]) -> None:
        rule[key] = value
    return mutate


def _first_branch_only(rule: dict[str, Any]) -> None:
    head, sep, _ = rule["expr"].partition("\nor\n")
    assert sep, "no `or` branch to drop"
    rule["expr"] = head


def _drop_volume_guard(rule: dict[str, Any]) -> None:
    head, sep, _ = rule["expr"].partition("and on (service_name, agent_name)")
    assert sep, "no volume guard to drop"
    rule["expr"] = head


MUTATIONS: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
    ("AgentCriticalViolation", "for: 5m added", _set("for", "5m")),
    ("AgentCriticalViolation", "born-at-1 branch dropped", _first_branch_only),
    ("AgentCriticalViolation", "keyed on a rule name", _replace('severity="critical"', 'rule="duplicate_write"')),
    ("AgentDuplicateWrite", "threshold 0 -> 1", _replace(") > 0", ") > 1")),
    ("AgentWriteWithoutConfirmation", "wrong rule name", _replace("write_without_confirmation", "write_unconfirmed")),
    ("AgentBudgetBreachesHigh", "for 15m -> 30m", _set("for", "30m")),
    ("AgentStepCountP99High", "threshold 24 -> 48", _replace("> 24", "> 48")),
    ("AgentStepCountP99High", "volume guard dropped", _drop_volume_guard),
    ("AgentStepCountP99Rising", "factor 1.5 -> 10", _replace("> 1.5 *", "> 10 *")),
    ("AgentCostPerSuccessHigh", "threshold 0.5 -> 1", _replace("> 0.5", "> 1")),
    ("AgentSuccessRateDrop", "factor 0.8 -> 0.4", _replace("< 0.8 *", "< 0.4 *")),
    ("AgentEvalTargetMissing", "wrong job", _replace('job="agenteval"', 'job="agent-eval"')),
    ("AgentEvalTargetDown", "== 0 -> == 1", _replace("== 0", "== 1")),
    ("AgentEvalProcessorErrors", "window 10m -> 1m", _replace("[10m]", "[1m]")),
    ("AgentEvalEvictionsHigh", "shutdown evictions counted", _replace('{reason=~"capacity|ttl"}', "")),
    ("AgentEvalLateSpansHigh", "threshold 1% -> 5%", _replace("> 0.01", "> 0.05")),
    ("AgentEvalStepsDropped", "window 1h -> 1m", _replace("[1h]", "[1m]")),
    ("AgentEvalSpansDropped", "every reason counted", _replace('{reason="queue_full"}', "")),
    ("AgentUncheckedCalls", "born-above-zero branch dropped", _first_branch_only),
    ("AgentUncheckedCalls", "window 1h -> 5m", _replace("[1h]", "[5m]")),
    ("AgentUnreadSpans", "born-above-zero branch dropped", _first_branch_only),
    ("AgentUnreadSpans", "window 1h -> 5m", _replace("[1h]", "[5m]")),
    ("AgentRunsReadInPieces", "born-above-zero branch dropped", _first_branch_only),
    ("AgentRunsReadInPieces", "window 1h -> 5m", _replace("[1h]", "[5m]")),
    ("AgentEvalFragmentsUnstitched", "born-above-zero branch dropped", _first_branch_only),
    ("AgentEvalFragmentsUnstitched", "every reason counted", _replace('{reason=~"buffer_full|memory"}', "")),
    ("AgentExpectedToolShareDropped", "margin 10 -> 30 points", _replace(") - 0.1", ") - 0.3")),
    ("AgentExpectedToolShareDropped", "any tool, expected or not",
     _replace("and on (tool) agenteval_policy_expected_tool == 1\n", "")),
    ("AgentExpectedToolShareDropped", "volume guard dropped", _drop_volume_guard),
    ("AgentLoopingCalls", "born-at-1 branch dropped", _first_branch_only),
    ("AgentLoopingCalls", "window 10m -> 1m", _replace("[10m]", "[1m]")),
]


def _copy_with(tmp: Path, alertname: str, mutate: Callable[[dict[str, Any]], None] | None) -> list[str]:
    """The rules (one alert mutated) and only the unit-test groups about that alert, in ``tmp``."""
    rules = _rules()
    if mutate is not None:
        [target] = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == alertname]
        mutate(target)
    (tmp / RULES.name).write_text(yaml.safe_dump(rules, sort_keys=False))
    names = []
    for path in UNIT_TESTS:
        tests = _unit_tests(path)
        tests["tests"] = [g for g in tests["tests"]
                          if any(c["alertname"] == alertname for c in g.get("alert_rule_test", []))]
        if tests["tests"]:
            (tmp / path.name).write_text(yaml.safe_dump(tests, sort_keys=False))
            names.append(path.name)
    assert names, f"no unit tests for {alertname}"
    return names


def test_every_alert_has_a_mutation() -> None:
    assert {name for name, _, _ in MUTATIONS} == set(_alerts())


_CONTROLS: dict[str, subprocess.CompletedProcess[str]] = {}


@pytest.mark.parametrize(("alertname", "what", "mutate"), MUTATIONS, ids=[f"{a}: {w}" for a, w, _ in MUTATIONS])
def test_broken_rule_fails_promtool_test_rules(promtool: str, tmp_path: Path, alertname: str, what: str,
                                               mutate: Callable[[dict[str, Any]], None]) -> None:
    intact = tmp_path / "intact"
    broken = tmp_path / "broken"
    intact.mkdir()
    broken.mkdir()
    if alertname not in _CONTROLS:  # the same copy, unmutated, passes: the mutation is what fails
        _CONTROLS[alertname] = _run(promtool, "test", "rules", *_copy_with(intact, alertname, None), cwd=intact)
    control = _CONTROLS[alertname]
    assert control.returncode == 0, "the unmutated copy must pass:\n" + control.stdout + control.stderr
    out = _run(promtool, "test", "rules", *_copy_with(broken, alertname, mutate), cwd=broken)
    assert out.returncode != 0, f"{alertname} with {what} still passes its unit tests"
    assert re.search(rf"alertname: {alertname}\b", out.stdout + out.stderr), out.stdout + out.stderr
