"""The cases file: YAML as in the issue, errors with paths, alternatives, ADK/agentevals EvalSet JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scoring_support import WORKED_CASES

from otel_agenteval.scoring.cases.load import CasesError, cases_from_text, load_cases

ISSUE_YAML = WORKED_CASES  # the file from the issue, as the acceptance test uses it


def test_issue_example_loads_and_means_what_it_says(tmp_path: Path) -> None:
    f = tmp_path / "cases.yaml"
    f.write_text(ISSUE_YAML)
    [case] = load_cases(f)
    assert (case.id, case.set) == ("refund-damaged", "regression")
    [path] = case.paths
    assert path.order == "in_order"
    assert [c.label() for c in path.calls] == [
        "lookup_order(order_id='88120')", "get_policy(topic='damaged_delivery')",
        "create_claim(order_id='88120', reason='damaged')"]
    assert path.length == 4  # three calls and the final answer
    assert path.max_steps == 8  # default budget: twice the reference length
    assert path.allowed_extras == frozenset()
    assert case.thresholds.argument_accuracy == 0.9


@pytest.mark.parametrize("text, error", [
    ("cases:\n  - id: a\n    reference: {requird: []}\n", "cases.0.reference.requird: unknown key (check the spelling)"),
    ("cases:\n  - id: a\n    reference: {order: sorted}\n", "cases.0.reference.order: Input should be"),
    ("cases:\n  - id: a\n    set: smoke\n    reference: {}\n", "cases.0.set: Input should be 'capability' or 'regression'"),
    ("cases:\n  - id: a\n    reference:\n      required: [{tool: t, args: {x: 1}, normalise: {x: lowercase}}]\n",
     "cases.0.reference.required.0.normalise: x: unknown normaliser 'lowercase'"),
    ("cases:\n  - id: a\n    reference:\n      required: [{tool: t}]\n      ordering: [[t, u]]\n",
     "ordering[0][1]: 'u' names no required call"),
    ("cases:\n  - id: a\n    reference:\n      required: [{tool: t}, {tool: u}]\n      ordering: [[t, u], [u, t]]\n",
     "cases.0.reference.ordering: the constraints form a cycle"),
    ("cases:\n  - {id: a, reference: {}}\n  - {id: a, reference: {}}\n", "case id 'a' appears twice"),
    ("cases:\n  - id: a\n    reference: {budget: {max_steps: 0}}\n", "cases.0.reference.budget.max_steps: must be > 0"),
    ("cases: [\n", "line"),
    ("- a\n", "(top level): must be a mapping"),
])
def test_errors_name_the_path(text: str, error: str) -> None:
    with pytest.raises(CasesError) as exc:
        cases_from_text(text, "cases.yaml")
    assert any(error in line for line in exc.value.errors), exc.value.errors
    assert str(exc.value).startswith("cases.yaml: invalid cases file")


def test_errors_carry_the_yaml_line() -> None:
    text = "cases:\n  - id: a\n    reference:\n      order: in_order\n      requird: []\n"
    with pytest.raises(CasesError) as exc:
        cases_from_text(text, "cases.yaml")
    assert exc.value.errors == ["cases.0.reference.requird: unknown key (check the spelling) (line 5)"]


def test_alternatives_inherit_unset_fields() -> None:
    [case] = cases_from_text("""
cases:
  - id: a
    reference:
      order: any_order
      allowed_extras: [search_orders]
      normalise: {order_id: id}
      budget: {max_steps: 5}
      required: [{tool: lookup_order, args: {order_id: "88120"}}]
      alternatives:
        - required: [{tool: search_orders, args: {query: "88120"}}, {tool: get_order, args: {order_id: "88120"}}]
        - order: exact
          allowed_extras: []
          required: [{tool: get_order, args: {order_id: "ORD-88120"}}]
""")
    main, alt1, alt2 = case.paths
    assert (alt1.order, alt1.allowed_extras, alt1.max_steps) == ("any_order", frozenset({"search_orders"}), 5)
    assert alt1.calls[1].accepts({"order_id": "ORD-88120"})  # the shared normaliser applies
    assert (alt2.order, alt2.allowed_extras) == ("exact", frozenset())
    assert alt2.index == 2 and main.index == 0


def test_superset_is_any_order() -> None:
    [case] = cases_from_text("cases: [{id: a, reference: {order: superset}}]")
    assert case.paths[0].order == "any_order"


ADK_EVALSET = {
    "eval_set_id": "support",
    "name": "support",
    "eval_cases": [
        {
            "eval_id": "refund-damaged",
            "conversation": [
                {
                    "invocation_id": "e-1",
                    "user_content": {"role": "user", "parts": [{"text": "Order 88120 arrived damaged."}]},
                    "final_response": {"role": "model", "parts": [{"text": "Claim created."}]},
                    "intermediate_data": {
                        "tool_uses": [
                            {"id": "adk-1", "name": "lookup_order", "args": {"order_id": "88120"}},
                            {"id": "adk-2", "name": "get_policy", "args": {"topic": "damaged_delivery"}},
                        ],
                        "intermediate_responses": [],
                    },
                },
                {
                    "invocation_id": "e-2",
                    "user_content": {"role": "user", "parts": [{"text": "Yes, go ahead."}]},
                    "intermediate_data": {"tool_uses": [
                        {"id": "adk-3", "name": "create_claim", "args": {"order_id": "88120", "reason": "damaged"}}]},
                },
            ],
            "session_input": {"app_name": "support", "user_id": "u1", "state": {}},
        }
    ],
}


def _camel(value: object) -> object:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            head, *rest = k.split("_")
            out[head + "".join(w.title() for w in rest)] = v if k == "args" else _camel(v)
        return out
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


@pytest.mark.parametrize("doc", [ADK_EVALSET, _camel(ADK_EVALSET)], ids=["snake_case", "camelCase"])
def test_adk_evalset(tmp_path: Path, doc: object) -> None:
    f = tmp_path / "support.evalset.json"
    f.write_text(json.dumps(doc))
    [case] = load_cases(f)
    assert case.id == "refund-damaged" and case.task == "Order 88120 arrived damaged."
    assert case.paths[0].order == "exact"
    assert [c.label() for c in case.paths[0].calls] == [
        "lookup_order(order_id='88120')", "get_policy(topic='damaged_delivery')",
        "create_claim(order_id='88120', reason='damaged')"]


def test_old_adk_test_json(tmp_path: Path) -> None:
    f = tmp_path / "fixture.test.json"
    f.write_text(json.dumps([{"query": "order 88120?", "expected_tool_use": [
        {"tool_name": "lookup_order", "tool_input": {"order_id": "88120"}}], "reference": "Found it."}]))
    [case] = load_cases(f)
    assert case.id == "case-1" and [c.tool for c in case.paths[0].calls] == ["lookup_order"]


def test_evalset_errors_name_the_path() -> None:
    bad = {"eval_cases": [{"eval_id": "x", "conversation": [{"intermediate_data": {"tool_uses": [{"args": {}}]}}]}]}
    with pytest.raises(CasesError) as exc:
        cases_from_text(json.dumps(bad), "e.json")
    assert exc.value.errors == ["eval_cases.0.conversation.0.intermediate_data.tool_uses.0.name: missing"]


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(CasesError, match="cannot read"):
        load_cases(tmp_path / "missing.yaml")


def test_policy_normalisers_apply_where_the_case_names_none() -> None:
    text = """
cases:
  - id: a
    reference:
      required:
        - {tool: lookup_order, args: {order_id: "88120"}}
        - {tool: get_policy, args: {topic: returns}, normalise: {topic: lower}}
"""
    [case] = cases_from_text(text, by_tool={"lookup_order": {"order_id": ["id"]}, "get_policy": {"topic": ["ignore"]}})
    lookup, policy = case.paths[0].calls
    assert lookup.accepts({"order_id": "ORD-88120"})
    assert policy.accepts({"topic": "RETURNS"}) and not policy.accepts({"topic": "damaged"})  # the case's own wins
    [plain] = cases_from_text(text)
    assert not plain.paths[0].calls[0].accepts({"order_id": "ORD-88120"})


def test_case_thresholds_override_the_file_one_field_at_a_time() -> None:
    a, b = cases_from_text("""
thresholds: {argument_accuracy: 0.5, warn_extra_steps: 1}
cases:
  - {id: a, reference: {}, thresholds: {argument_accuracy: 0.8}}
  - {id: b, reference: {}}
""")
    assert (a.thresholds.argument_accuracy, a.thresholds.warn_extra_steps) == (0.8, 1)
    assert (b.thresholds.argument_accuracy, b.thresholds.warn_extra_steps) == (0.5, 1)
