"""pass^k, pass@k and the per-set summaries, capability and regression kept apart."""

from __future__ import annotations

from math import comb

import pytest
from scoring_support import SUPPORT_POLICY, WORKED_RUN, trajectory

from otel_agenteval.scoring.cases.load import cases_from_text
from otel_agenteval.scoring.reliability import (
    CaseResult,
    TrialsError,
    check_trials,
    mean_pass_hat_k,
    pass_at_k,
    pass_hat_k,
    set_summary,
)
from otel_agenteval.scoring.score import score_run

FOUR_ITEMS = [(8, 8), (8, 7), (8, 4), (8, 0)]  # (trials, passes)


def test_four_items_eight_trials() -> None:
    assert round(mean_pass_hat_k(FOUR_ITEMS, 1), 2) == 0.59
    assert round(mean_pass_hat_k(FOUR_ITEMS, 4), 2) == 0.38
    assert round(mean_pass_hat_k(FOUR_ITEMS, 8), 2) == 0.25
    curve = [mean_pass_hat_k(FOUR_ITEMS, k) for k in range(1, 9)]
    assert curve == sorted(curve, reverse=True)  # the reliability curve only falls


def test_pass_hat_k_is_the_estimator() -> None:
    assert pass_hat_k(8, 7, 4) == comb(7, 4) / comb(8, 4) == 0.5
    assert pass_hat_k(5, 5, 5) == 1.0 and pass_hat_k(5, 4, 5) == 0.0


def test_more_k_than_trials_is_an_error() -> None:
    with pytest.raises(TrialsError, match="pass\\^9 needs at least 9 trials, the case has 8"):
        mean_pass_hat_k(FOUR_ITEMS, 9)
    with pytest.raises(TrialsError):
        pass_at_k(3, 1, 4)
    with pytest.raises(TrialsError):
        pass_hat_k(3, 1, 0)


def test_pass_at_k_flatters() -> None:
    assert pass_at_k(8, 4, 1) == 0.5
    assert pass_at_k(8, 4, 5) == 1.0  # five draws from eight with four failures must hit a pass
    assert pass_at_k(8, 0, 8) == 0.0
    assert sum(pass_at_k(n, c, 4) for n, c in FOUR_ITEMS) / 4 > mean_pass_hat_k(FOUR_ITEMS, 4)


CASES = """
cases:
  - id: reg
    set: regression
    reference: {required: [{tool: lookup_order, args: {order_id: "88120"}}]}
  - id: cap
    reference: {required: [{tool: lookup_order, args: {order_id: "88120"}}]}
  - id: none
    reference: {required: []}
"""


def test_sets_are_summarised_apart() -> None:
    reg, cap, none = (CaseResult(c) for c in cases_from_text(CASES))
    good, v = trajectory(WORKED_RUN[:1], input_tokens=2000, output_tokens=0)  # $0.005
    bad, bv = trajectory(WORKED_RUN[1:2], input_tokens=4000, output_tokens=0)  # $0.010
    reg.runs = [score_run(good, reg.case, SUPPORT_POLICY, v) for _ in range(3)]
    cap.runs = [score_run(good, cap.case, SUPPORT_POLICY, v), score_run(bad, cap.case, SUPPORT_POLICY, bv)]
    r = set_summary([reg])
    assert (r["runs"], r["passes"], r["pass_rate"], r["pass_hat_k"]) == (3, 3, 1.0, {"1": 1.0, "2": 1.0, "3": 1.0})
    assert r["cost_usd"]["per_success"] == 0.005
    c = set_summary([cap, none])
    assert (c["cases"], c["runs"], c["passes"], c["pass_rate"]) == (2, 2, 1, 0.5)
    assert c["cases_without_runs"] == ["none"]
    assert c["pass_hat_k"] == {"1": 0.5, "2": 0.0}
    assert c["pass_at_k"] == {"1": 0.5, "2": 1.0}
    assert c["cost_usd"]["per_success"] == 0.015  # all the cost over the one success
    assert (c["cost_usd"]["p50"], c["cost_usd"]["p95"]) == (0.005, 0.01)
    assert c["steps"] == {"p50": 2.0, "p95": 2.0, "max": 2.0}
    assert check_trials([reg, cap, none], 3) == ["case cap: 2 trials, fewer than k=3"]
    assert cap.failed(1, 1.0) and not reg.failed(3, 1.0) and none.failed(1, 0.0)
