"""One run against its case, from real SDK spans through the processor: numbers, verdict, step marks."""

from __future__ import annotations

from typing import Any

from scoring_support import SUPPORT_POLICY, WORKED_CASES, WORKED_RUN, trajectory

from otel_agenteval import Policy
from otel_agenteval.scoring.cases.load import cases_from_text
from otel_agenteval.scoring.score import score_run


def case_of(yaml_text: str) -> Any:
    return cases_from_text(yaml_text)[0]


def one_case(required: str, order: str = "in_order", extra: str = "") -> Any:
    return case_of(f"""
cases:
  - id: c
    reference:
      order: {order}
      required: {required}
{extra}""")


def test_worked_example_in_memory() -> None:
    t, violations = trajectory(WORKED_RUN, case="refund-damaged", trial=3)
    s = score_run(t, case_of(WORKED_CASES), SUPPORT_POLICY, violations)
    assert (s.coverage, round(s.argument_accuracy or 0, 2), s.extra_steps, s.duplicate_writes, s.verdict) == (
        True, 0.80, 3, 1, "fail")
    assert (s.run_steps, s.reference_steps, s.trial) == (7, 4, 3)
    assert [m.mark for m in s.steps] == ["matches step 1", "extra", "wrong argument", "matches step 2",
                                         "matches step 3", "DUPLICATE WRITE"]
    assert s.reasons == [
        "duplicate write: step 6 create_claim repeats a successful write with identical arguments",
        "argument accuracy 0.80 below 0.90 (4 of 5 right)",
    ]
    assert s.first_divergence is not None and s.first_divergence.startswith("step 2: search_orders (extra)")


def test_clean_run_passes() -> None:
    clean = [WORKED_RUN[0], WORKED_RUN[3], WORKED_RUN[4]]
    t, v = trajectory(clean)
    s = score_run(t, case_of(WORKED_CASES), SUPPORT_POLICY, v)
    assert (s.verdict, s.reasons, s.coverage, s.argument_accuracy, s.extra_steps, s.first_divergence) == (
        "pass", [], True, 1.0, 0, None)


def test_critical_violation_fails_whatever_else_holds() -> None:
    """Without the write policy the duplicate is just a repeated call; the critical violation still fails."""
    t, v = trajectory(WORKED_RUN)
    assert [x.rule for x in v] == ["duplicate_write"]
    case = one_case("[{tool: create_claim, args: {order_id: '88120', reason: damaged}}]", "any_order")
    s = score_run(t, case, Policy(), v)  # this policy marks nothing as a write
    # the engine's rule found it (the violation): the count says so too, never 0 next to it
    assert s.duplicate_writes == 1
    assert [m.detail for m in s.steps if m.detail and "duplicate" in m.detail] == [
        "duplicate write found by the duplicate_write rule"]
    assert s.verdict == "fail" and s.reasons[0].startswith("critical violation duplicate_write at create_claim")


def test_missing_call_fails_and_empty_run() -> None:
    t, v = trajectory([])
    s = score_run(t, case_of(WORKED_CASES), SUPPORT_POLICY, v)
    assert (s.coverage, s.argument_accuracy, s.extra_steps, s.duplicate_writes, s.verdict) == (False, None, -3, 0, "fail")
    assert s.reasons[0] == "required call lookup_order(order_id='88120') is missing"
    assert s.first_divergence == "after step 0: reference step 1 lookup_order(order_id='88120') never came"
    empty = one_case("[]")
    s = score_run(t, empty, SUPPORT_POLICY, v)
    assert (s.verdict, s.coverage, s.argument_accuracy, s.extra_steps, s.steps) == ("pass", True, None, 0, [])


def test_budget_and_warn_thresholds() -> None:
    calls = [("lookup_order", {"order_id": "88120"})] + [("search_orders", {"query": str(i)}) for i in range(5)]
    t, v = trajectory(calls)
    s = score_run(t, one_case("[{tool: lookup_order, args: {order_id: '88120'}}]"), SUPPORT_POLICY, v)
    # reference length 2 (one call + answer) -> budget 4 steps; the run has 7
    assert s.verdict == "fail" and "over budget: 7 steps > 4" in s.reasons
    roomy = one_case("[{tool: lookup_order, args: {order_id: '88120'}}]",
                     extra="      budget: {max_steps: 10}\n")
    s = score_run(t, roomy, SUPPORT_POLICY, v)
    assert (s.verdict, s.reasons) == ("warn", ["5 extra steps (more than 4)"])
    assert s.passed
    priced = one_case("[{tool: lookup_order, args: {order_id: '88120'}}]",
                      extra="      budget: {max_steps: 10, max_cost_usd: 0.001}\n")
    s = score_run(t, priced, SUPPORT_POLICY, v)
    assert "over budget: cost $0.0045 > $0.0010" in s.reasons  # 1000 in + 200 out tokens of gpt-4o


def test_argument_accuracy_threshold_per_case() -> None:
    run = [("get_policy", {"topic": "returns"}), ("get_policy", {"topic": "damaged_delivery"})]
    t, v = trajectory(run)
    lenient = case_of("""
thresholds: {argument_accuracy: 0.5}
cases:
  - id: c
    reference: {required: [{tool: get_policy, args: {topic: damaged_delivery}}]}
""")
    s = score_run(t, lenient, SUPPORT_POLICY, v)
    assert (s.argument_accuracy, s.verdict) == (0.5, "pass")
    strict = case_of("""
thresholds: {argument_accuracy: 0.5}
cases:
  - id: c
    thresholds: {argument_accuracy: 0.9}
    reference: {required: [{tool: get_policy, args: {topic: damaged_delivery}}]}
""")
    assert score_run(t, strict, SUPPORT_POLICY, v).verdict == "fail"


def test_alternatives_a_run_passes_if_it_matches_any() -> None:
    case = case_of("""
cases:
  - id: c
    reference:
      required:
        - {tool: lookup_order, args: {order_id: "88120"}}
        - {tool: create_claim, args: {order_id: "88120", reason: damaged}}
      alternatives:
        - required:
            - {tool: search_orders, args: {query: "88120"}}
            - {tool: create_claim, args: {order_id: "88120", reason: damaged}}
""")
    t, v = trajectory([("search_orders", {"query": "88120"}),
                       ("create_claim", {"order_id": "88120", "reason": "damaged"})])
    s = score_run(t, case, SUPPORT_POLICY, v)
    assert (s.verdict, s.reference, s.coverage) == ("pass", 1, True)
    t, v = trajectory([("create_claim", {"order_id": "88120", "reason": "damaged"})])
    s = score_run(t, case, SUPPORT_POLICY, v)
    assert s.verdict == "fail" and s.reference == 0  # neither fits: the main reference is reported


def test_retry_after_error_is_marked() -> None:
    run = [("create_claim", {"order_id": "88120", "reason": "damaged"}, False),
           ("create_claim", {"order_id": "88120", "reason": "damaged_in_transit"})]
    t, v = trajectory(run)
    s = score_run(t, one_case("[{tool: create_claim, args: {order_id: '88120', reason: damaged}}]"),
                  SUPPORT_POLICY, v)
    assert [(m.mark, m.ok) for m in s.steps] == [("matches step 1", False), ("after error", True)]
    assert s.duplicate_writes == 0


def test_identical_expected_and_made_calls_score_full_marks() -> None:
    """Two identical calls the reference asks for, even writes, are neither duplicates nor wrong."""
    for tool in ("get_policy", "create_claim"):
        args = {"order_id": "88120", "reason": "damaged"}
        t, v = trajectory([(tool, args), (tool, args)])
        req = f"[{{tool: {tool}, args: {{order_id: '88120', reason: damaged}}}}]"
        case = one_case(req.replace("]", ", " + req[1:-1] + "]"))
        s = score_run(t, case, SUPPORT_POLICY, v)
        assert (s.verdict, s.coverage, s.argument_accuracy, s.extra_steps, s.duplicate_writes, s.reasons) == (
            "pass", True, 1.0, 0, 0, []), tool


def test_normalisers_apply_in_scoring() -> None:
    t, v = trajectory([("lookup_order", {"order_id": "ORD-88120"})])
    plain = one_case("[{tool: lookup_order, args: {order_id: '88120'}}]")
    assert score_run(t, plain, SUPPORT_POLICY, v).steps[0].mark == "wrong argument"
    ids = one_case("[{tool: lookup_order, args: {order_id: '88120'}, normalise: {order_id: id}}]")
    assert score_run(t, ids, SUPPORT_POLICY, v).verdict == "pass"


def test_json_shape_hides_argument_values_unless_asked() -> None:
    t, v = trajectory(WORKED_RUN[:1])
    s = score_run(t, case_of(WORKED_CASES), SUPPORT_POLICY, v)
    d = s.to_dict()
    assert "arguments" not in d["steps"][0]
    assert s.to_dict(show_arguments=True)["steps"][0]["arguments"] == {"order_id": "88120"}


def test_steps_the_engine_dropped_still_count() -> None:
    small = Policy.from_dict({"tools": {"create_claim": {"write": True}}, "limits": {"max_steps_per_trajectory": 3}})
    calls = [("lookup_order", {"order_id": "88120"})] + [("search_orders", {"query": str(i)}) for i in range(4)]
    t, v = trajectory(calls, policy=small)
    assert (len(t.steps), t.tool_calls) == (3, 5)
    s = score_run(t, one_case("[{tool: lookup_order, args: {order_id: '88120'}}]"), small, v)
    assert (s.run_steps, s.extra_steps) == (6, 4)
    assert "2 steps past the policy's max_steps_per_trajectory were not kept" in s.reasons


def test_run_dict_rounds_as_round_does() -> None:
    """The run dict skips ``round`` for 0 and 1 (its dearest call): the values are round's all the same."""
    import math

    from otel_agenteval.scoring.run_score import RunScore

    for v in (0.0, -0.0, 1.0, 0.5, 0.123456789, 2 / 3, 0.99995, 1e-9, 123.4567891):
        run = RunScore("c", "t", None, "a", "pass", [], True, v, 0, 0, 3, 2, 0, [], None,
                       cost_usd=v, duration_s=v)
        d = run.to_dict()
        for key, digits in (("argument_accuracy", 4), ("cost_usd", 6), ("duration_s", 3)):
            assert d[key] == round(v, digits) and math.copysign(1, d[key]) == math.copysign(1, round(v, digits)), key
        assert d["step_efficiency"] == round(2 / 3, 4) and d["redundant_call_rate"] == 0.0
