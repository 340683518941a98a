"""Outcome of a trajectory and its cost: tokens x the policy's prices, never counted twice."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ISSUE_POLICY, Harness

PRICED = """\
pricing:
  gpt-4o: {input_per_mtok: 2.50, output_per_mtok: 10.00}
  gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.60}
"""

# --- outcome ------------------------------------------------------------------------------------------


def outcome_of(h: Harness, claim_ok: bool | None, root_error: bool = False, explicit: Any = None) -> str:
    root = h.agent("support", 0)
    if claim_ok is not None:
        h.tool(root, "create_claim", {"order_id": "1"}, at=1, error=None if claim_ok else "carrier down")
    h.end(root, 2, {"agenteval.outcome": explicit} if explicit is not None else None,
          error="boom" if root_error else None)
    (t,) = h.trajectories
    assert h.agent_value("agenteval_trajectories_total", "support", outcome=t.outcome) == 1.0
    return t.outcome


@pytest.mark.parametrize("claim_ok,root_error,explicit,expected", [
    # the explicit root attribute wins over everything
    (True, False, "failure", "failure"),
    (False, True, "success", "success"),
    (None, False, "success", "success"),
    # else success_when: the named tool succeeded
    (True, False, None, "success"),
    (True, True, None, "success"),
    # else root status ERROR -> failure
    (False, True, None, "failure"),
    (None, True, None, "failure"),
    # else unknown (a failed success_when tool alone says nothing)
    (False, False, None, "unknown"),
    (None, False, None, "unknown"),
    # a value that is not success/failure is ignored
    (None, True, "maybe", "failure"),
    (True, False, "", "success"),
])
def test_outcome_order(make_processor: Any, claim_ok: bool | None, root_error: bool, explicit: Any,
                       expected: str) -> None:
    assert outcome_of(make_processor(ISSUE_POLICY), claim_ok, root_error, explicit) == expected


def test_outcome_without_success_when(make_processor: Any) -> None:
    assert outcome_of(make_processor(), claim_ok=True) == "unknown"
    assert outcome_of(make_processor(), claim_ok=True, root_error=True) == "failure"


def test_outcome_attribute_on_a_non_agent_root(make_processor: Any) -> None:
    h = make_processor(ISSUE_POLICY)
    http = h.start("POST /claims", None, 0)
    h.tool(http, "lookup_order", {"order_id": "1"}, at=1)
    h.end(http, 2, {"agenteval.outcome": "success"})
    assert [t.outcome for t in h.trajectories] == ["success"]


def test_outcome_attribute_set_by_a_checker_on_an_openinference_agent(make_processor: Any) -> None:
    h = make_processor(ISSUE_POLICY)
    root = h.start("support_agent", None, 0, {"openinference.span.kind": "AGENT"})
    tool = h.start("create_claim", root, 1, {"openinference.span.kind": "TOOL"})
    h.end(tool, 1.5, {"tool.name": "create_claim", "input.value": '{"order_id": "1"}'})
    h.end(root, 2, {"agent.name": "support_agent", "agenteval.outcome": "failure"})
    assert [(t.agent_name, t.outcome) for t in h.trajectories] == [("support_agent", "failure")]


# --- cost ------------------------------------------------------------------------------------------------

def test_cost_from_llm_spans_with_prefix_pricing(make_processor: Any) -> None:
    h = make_processor(PRICED)
    root = h.agent("support", 0)
    h.chat(root, at=1, inp=1000, out=100, model="gpt-4o-2024-08-06")  # 0.0025 + 0.001
    h.chat(root, at=2, inp=10_000, out=1000, model="gpt-4o-mini-2024-07-18")  # 0.0015 + 0.0006
    h.chat(root, at=3, inp=5000, out=5000, model="llama-local")  # not priced
    h.end(root, 4)
    (t,) = h.trajectories
    assert (t.llm_calls, t.input_tokens, t.output_tokens) == (3, 16_000, 6100)
    assert t.cost_usd == pytest.approx(0.0056)
    assert h.agent_value("agenteval_trajectory_cost_usd_sum", "support", outcome="unknown") == pytest.approx(0.0056)
    assert h.agent_value("agenteval_trajectory_cost_usd_count", "support", outcome="unknown") == 1.0
    assert h.agent_value("agenteval_tokens_total", "support", type="input") == 16_000
    assert h.agent_value("agenteval_tokens_total", "support", type="output") == 6100


def test_response_model_priced_before_request_model(make_processor: Any) -> None:
    h = make_processor(PRICED)
    root = h.agent("support", 0)
    chat = h.start("chat", root, 1, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"})
    h.end(chat, 2, {"gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": 1_000_000,
                    "gen_ai.usage.output_tokens": 0})
    h.end(root, 3)
    assert h.trajectories[0].cost_usd == pytest.approx(0.15)


def test_agent_totals_ignored_when_llm_spans_exist(make_processor: Any) -> None:
    """pydantic-ai: gen_ai.aggregated_usage on the agent span repeats what the chat spans counted."""
    h = make_processor(PRICED)
    root = h.agent("support", 0, model_name="gpt-4o")
    h.chat(root, at=1, inp=600, out=60)
    h.chat(root, at=2, inp=400, out=40)
    h.end(root, 3, {"gen_ai.aggregated_usage.input_tokens": 1000, "gen_ai.aggregated_usage.output_tokens": 100})
    (t,) = h.trajectories
    assert (t.input_tokens, t.output_tokens, t.cost_usd) == (1000, 100, pytest.approx(0.0035))
    assert h.agent_value("agenteval_tokens_total", "support", type="input") == 1000


def test_agent_totals_used_when_no_llm_spans(make_processor: Any) -> None:
    h = make_processor(PRICED)
    root = h.agent("support", 0, model_name="gpt-4o-2024-08-06")
    h.tool(root, "lookup_order", {"order_id": "1"}, at=1)
    h.end(root, 3, {"gen_ai.aggregated_usage.input_tokens": 1000, "gen_ai.aggregated_usage.output_tokens": 100})
    (t,) = h.trajectories
    assert (t.llm_calls, t.input_tokens, t.output_tokens, t.cost_usd) == (0, 1000, 100, pytest.approx(0.0035))
    assert h.agent_value("agenteval_tokens_total", "support", type="output") == 100
    assert h.agent_value("agenteval_trajectory_cost_usd_sum", "support", outcome="unknown") == pytest.approx(0.0035)


def test_strands_tokens_counted_once(make_processor: Any) -> None:
    """Strands: chat spans repeat usage under two names, the agent span sums them again."""
    h = make_processor(PRICED)
    root = h.start("invoke_agent support_agent", None, 0)
    for i, (inp, out) in enumerate([(300, 30), (700, 70)]):
        cycle = h.start("execute_event_loop_cycle", root, i + 0.1)
        chat = h.start("chat", cycle, i + 0.2)
        h.end(chat, i + 0.5, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                              "gen_ai.usage.prompt_tokens": inp, "gen_ai.usage.input_tokens": inp,
                              "gen_ai.usage.completion_tokens": out, "gen_ai.usage.output_tokens": out,
                              "gen_ai.usage.total_tokens": inp + out})
        h.end(cycle, i + 0.9, {"gen_ai.operation.name": "execute_event_loop_cycle"})
    h.end(root, 3, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_agent",
                    "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.prompt_tokens": 1000,
                    "gen_ai.usage.output_tokens": 100, "gen_ai.usage.completion_tokens": 100,
                    "gen_ai.usage.total_tokens": 1100})
    (t,) = h.trajectories
    assert (t.agent_name, t.llm_calls, t.input_tokens, t.output_tokens, t.cost_usd) == (
        "support_agent", 2, 1000, 100, pytest.approx(0.0035))
    assert h.agent_value("agenteval_tokens_total", "support_agent", type="input") == 1000


def test_tokens_budget_from_agent_totals_at_finish(make_processor: Any) -> None:
    """With no LLM spans, the agent span's totals still face the tokens and cost budgets."""
    h = make_processor(PRICED + "agents: {'*': {budget: {max_tokens: 500, max_cost_usd: 0.001}}}")
    root = h.agent("support", 0, model_name="gpt-4o")
    h.end(root, 3, {"gen_ai.aggregated_usage.input_tokens": 1000, "gen_ai.aggregated_usage.output_tokens": 100})
    assert sorted((v.details["budget"], v.span_id) for v in h.violations) == [("cost", None), ("tokens", None)]


def test_cost_per_successful_task_inputs(make_processor: Any) -> None:
    """The dashboard divides cost_usd_sum by successful trajectories: both are exported per outcome."""
    h = make_processor(ISSUE_POLICY)
    for i, ok in enumerate([True, True, False]):
        root = h.agent("support", i * 10)
        h.chat(root, at=i * 10 + 1, inp=1000, out=100)
        h.tool(root, "create_claim", {"order_id": str(i)}, at=i * 10 + 2, error=None if ok else "down")
        h.end(root, i * 10 + 3)
    assert h.agent_value("agenteval_trajectories_total", "support", outcome="success") == 2.0
    assert h.agent_value("agenteval_trajectory_cost_usd_sum", "support", outcome="success") == pytest.approx(0.007)
    assert h.agent_value("agenteval_trajectory_cost_usd_sum", "support", outcome="unknown") == pytest.approx(0.0035)
