"""Hardening round 4 (#40), the guard's hook: a ``@guarded`` tool whose result (or arguments)
cannot be JSON-encoded (B11). The hook never raises on its own account, and a write that ran is
recorded as having run, so its retry is a duplicate the guard stops."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_guard_hooks import Rig

from otel_agenteval.guard.hooks.plain import guarded


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    yield r
    r.provider.shutdown()


def _circular() -> dict[str, Any]:
    d: dict[str, Any] = {"claim_id": "CLM-1"}
    d["self"] = d
    return d


def test_a_write_whose_result_cannot_be_encoded_ran_once_and_its_retry_is_a_duplicate(rig: Rig) -> None:
    ran: list[str] = []

    @guarded("create_claim", guard=rig.guard, tracer_provider=rig.provider)
    def create_claim(order_id: str, reason: str) -> dict[str, Any]:
        ran.append(order_id)
        return _circular()

    with rig.agent("conv-b11"):
        first = create_claim("88120", "damaged")  # before: ValueError raised here, after the claim was made
        second = create_claim("88120", "damaged")  # the agent's retry
    assert first["claim_id"] == "CLM-1"
    assert isinstance(second, str) and "duplicate_write" in second
    assert ran == ["88120"]
    assert rig.blocked() == {("duplicate_write", "create_claim"): 1}
    assert [v.rule for v in rig.violations] == []
    [t] = rig.trajectories
    assert [(s.tool, s.ok) for s in t.steps] == [("create_claim", True)]
    spans = rig.tool_spans()
    assert spans[0].attributes["gen_ai.tool.call.result"] == "<not JSON: dict>"
    assert spans[0].status.is_ok


def test_arguments_that_cannot_be_encoded_never_raise_from_the_hook(rig: Rig) -> None:
    class Odd:
        def __str__(self) -> str:
            raise RuntimeError("no str")

    @guarded("lookup_order", guard=rig.guard, tracer_provider=rig.provider)
    def lookup_order(order: Any) -> Any:
        return {"found": Odd()}

    with rig.agent("conv-b11-args"):
        got = lookup_order(_circular())
    assert isinstance(got["found"], Odd)
    assert [s.attributes["gen_ai.tool.call.arguments"] for s in rig.tool_spans()] == ["<not JSON: dict>"]
