"""Matching a run to a reference: every order mode, ordering constraints, extras, optimality."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest

from otel_agenteval import ToolStep
from otel_agenteval.scoring.cases.load import ReferencePath, cases_from_dict
from otel_agenteval.scoring.match import hungarian, match


def steps(*calls: Any) -> list[ToolStep]:
    """``("tool", {args})`` or ``("tool", {args}, ok)``, as the engine would record them."""
    out = []
    for i, c in enumerate(calls):
        out.append(ToolStep(tool=c[0], start_ns=i, end_ns=i, span_id=i + 1, trace_id=1,
                            ok=c[2] if len(c) > 2 else True, raw_arguments=json.dumps(c[1]), index=i))
    return out


def ref(required: list[Any], **reference: Any) -> ReferencePath:
    calls = [{"tool": r[0], "args": r[1], **(r[2] if len(r) > 2 else {})} for r in required]
    data = {"cases": [{"id": "c", "reference": {"required": calls, **reference}}]}
    return cases_from_dict(data)[0].paths[0]


A = ("a", {})
B = ("b", {})
C = ("c", {})
X = ("x", {})  # a tool outside the reference


def covers(mode: str, run: list[Any], required: list[Any] = (A, B, C), **kw: Any) -> bool:  # type: ignore[assignment]
    return match(ref(list(required), order=mode, **kw), steps(*run)).coverage


# mode, run, covered?
CASES = [
    ("exact", [A, B, C], True),
    ("exact", [A, C, B], False),
    ("exact", [A, B, C, X], False),
    ("exact", [A, B], False),
    ("in_order", [A, X, B, X, C], True),
    ("in_order", [A, C, B], False),
    ("in_order", [A, B], False),
    ("any_order", [C, X, A, B], True),
    ("any_order", [C, A], False),
    ("superset", [C, B, A, X], True),
    ("unordered", [C, A, B], True),
    ("unordered", [C, A, B, X], False),
    ("unordered", [C, A], False),
    ("subset", [C, A], True),
    ("subset", [], True),
    ("subset", [C, A, X], False),
    ("subset", [A, A], False),  # each call needs its own reference step
]


@pytest.mark.parametrize("mode, run, expected", CASES)
def test_order_modes(mode: str, run: list[Any], expected: bool) -> None:
    assert covers(mode, run) is expected


def test_reasons_name_the_problem() -> None:
    m = match(ref([A, B, C], order="in_order"), steps(A, C, B))
    assert m.reasons == ["required call c() is out of order"]
    m = match(ref([A, B, C], order="exact"), steps(A, B, X))
    assert m.reasons == ["required call c() is missing", "step 3 x is not in the reference (order: exact)"]


def test_a_call_used_once_cannot_cover_two_steps() -> None:
    m = match(ref([A, A], order="in_order"), steps(A))
    assert m.reasons == ["required call a() is missing"]


def test_ordering_constraints_let_independent_calls_swap() -> None:
    four = [("policy_lookup", {}), ("coverage_rules", {}), ("fraud_flags", {}), ("route", {})]
    kw = {"order": "any_order", "ordering": [["policy_lookup", "coverage_rules", "route"], ["fraud_flags", "route"]]}
    p, cov, fraud, route = four
    assert match(ref(four, **kw), steps(p, fraud, cov, route)).coverage  # fraud and coverage swapped
    m = match(ref(four, **kw), steps(p, cov, route, fraud))  # route before fraud_flags
    assert not m.coverage
    assert any("out of order" in r for r in m.reasons)
    # an extra route call after the checks still satisfies the constraint: optimal, not first
    assert match(ref(four, **kw), steps(p, route, cov, fraud, route)).coverage


def test_ordering_by_step_id() -> None:
    required = [("get", {"k": "1"}, {"id": "first"}), ("get", {"k": "2"}, {"id": "second"})]
    kw = {"order": "any_order", "ordering": [["first", "second"]]}
    assert match(ref(required, **kw), steps(("get", {"k": "1"}), ("get", {"k": "2"}))).coverage
    assert not match(ref(required, **kw), steps(("get", {"k": "2"}), ("get", {"k": "1"}))).coverage


def test_allowed_extras_are_not_wrong_in_strict_modes() -> None:
    assert covers("exact", [A, X, B, C], allowed_extras=["x"])
    assert covers("unordered", [X, C, B, A], allowed_extras=["x"])
    assert covers("subset", [X, C], allowed_extras=["x"])


def test_optimal_where_greedy_fails() -> None:
    """The first get_policy fits both steps; greedy gives it the wildcard step and strands the second."""
    required = [("get_policy", {"topic": "any"}, {"normalise": {"topic": "ignore"}}),
                ("get_policy", {"topic": "damaged_delivery"})]
    run = steps(("get_policy", {"topic": "damaged_delivery"}), ("get_policy", {"topic": "returns"}))
    path = ref(required, order="any_order")
    greedy_left = list(range(len(path.calls)))
    for call in run:  # what a greedy matcher does: first step that fits
        for j in greedy_left:
            if call.tool == path.calls[j].tool and path.calls[j].accepts(call.arguments):
                greedy_left.remove(j)
                break
    assert greedy_left == [1]  # greedy misses the damaged_delivery step
    m = match(path, run)
    assert m.coverage and m.step_of == {0: 1, 1: 0}


def test_identical_expected_and_made_calls() -> None:
    same = ("get_policy", {"topic": "returns"})
    for mode in ("exact", "in_order", "any_order", "unordered", "subset"):
        m = match(ref([same, same], order=mode), steps(same, same))
        assert m.coverage and sorted(m.step_of.values()) == [0, 1], mode


def test_empty_run_and_empty_reference() -> None:
    assert not covers("in_order", [])
    assert match(ref([A], order="any_order"), []).missing == [0]
    for mode in ("exact", "in_order", "any_order", "unordered", "subset"):
        assert match(ref([], order=mode), []).coverage, mode
    assert covers("in_order", [X], required=[])
    assert not covers("exact", [X], required=[])


def test_prefers_successful_then_earlier_calls() -> None:
    path = ref([("create_claim", {"order_id": "1"})], order="in_order")
    m = match(path, steps(("create_claim", {"order_id": "1"}, False), ("create_claim", {"order_id": "1"})))
    assert m.step_of == {1: 0}
    m = match(path, steps(("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})))
    assert m.step_of == {0: 0}


def test_excluded_calls_never_match() -> None:
    path = ref([A], order="any_order")
    assert match(path, steps(A), excluded=frozenset({0})).missing == [0]


def test_hungarian_is_optimal_against_brute_force() -> None:
    rng = random.Random(7)
    for size in range(1, 7):
        for _ in range(30):
            cost = [[rng.randint(0, 20) for _ in range(size)] for _ in range(size)]
            got = hungarian(cost)
            assert sorted(got) == list(range(size))
            best = min(sum(cost[r][c] for r, c in enumerate(p)) for p in itertools.permutations(range(size)))
            assert sum(cost[r][c] for r, c in enumerate(got)) == best


def test_in_order_dp_is_optimal_against_brute_force() -> None:
    """Random runs over a small alphabet: the DP covers exactly when some order-preserving matching exists."""
    rng = random.Random(11)
    required = [("t", {"v": "1"}), ("t", {"v": "any"}, {"normalise": {"v": "ignore"}}), ("t", {"v": "2"})]
    path = ref(required, order="in_order")
    for _ in range(200):
        run = steps(*[("t", {"v": rng.choice("123")}) for _ in range(rng.randint(0, 5))])
        exists = any(
            all(path.calls[j].accepts(run[i].arguments) for j, i in enumerate(combo))
            for combo in itertools.combinations(range(len(run)), 3)
        )
        assert match(path, run).coverage is exists
