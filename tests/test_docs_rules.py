"""Every ``rule-trace`` block of docs/rules.md, run through the real SDK and the processor."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry import trace

from otel_agenteval import Policy, record_confirmation

DOC = Path(__file__).parent.parent / "docs" / "rules.md"
BLOCKS = re.findall(r"```yaml rule-trace\n(.*?)```", DOC.read_text(), re.S)


def test_every_rule_has_a_passing_and_a_failing_trace():
    expects = [yaml.safe_load(b)["expect"] for b in BLOCKS]
    assert sum(1 for e in expects if e == []) >= 8
    fired = {r for e in expects for r in e}
    assert fired >= {"duplicate_write", "write_retried_after_error", "budget_breach", "write_without_confirmation",
                     "unauthorized_action", "scope_violation", "ordering_violation", "conditional_forbidden",
                     "ungrounded_argument", "tainted_argument"}


def _play(h: Any, run: dict[str, Any], at: float) -> float:
    root = h.agent(run["agent"], at, conv=run.get("conv"), **run.get("attrs", {}))
    for step in run["steps"]:
        at += 1
        if "tool" in step:
            result = step.get("result")
            h.tool(root, step["tool"], step.get("args", {}), at=at, error=step.get("error"),
                   result=result if result is None or isinstance(result, str) else json.dumps(result),
                   conv=run.get("conv"))
        elif "chat" in step:
            msgs = [{"role": r, "parts": [{"type": "text", "content": c}]} for r, c in step["chat"]]
            h.chat(root, at=at, end_attrs={"gen_ai.input.messages": json.dumps(msgs)})
        elif "confirm" in step:
            with trace.use_span(root, end_on_exit=False):
                record_confirmation(step["confirm"].get("tool"), step["confirm"].get("arguments"), tracer=h.tracer)
    h.end(root, at + 1)
    return at + 10


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_rule_trace(make_processor, block):
    spec = yaml.safe_load(block)
    h = make_processor(Policy.from_dict(spec["policy"]))
    at = 0.0
    for run in spec["runs"]:
        at = _play(h, run, at)
    assert [v.rule for v in h.violations] == spec["expect"]
