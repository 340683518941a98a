"""A finished run as the judge reads it: compact, and without content unless the policy opts in.

Always sent (``SHAPE_FIELDS``): the agent's name, the outcome, counts (tool calls, failures,
model calls, tokens), duration, each tool step's name, success and error type with its
arguments' *names*, and the rules' findings (rule, severity, tool, message: findings carry
hashes, never argument values). With ``judge.content: true`` also (``CONTENT_FIELDS``): each
step's argument values and result as captured, and the root span's input and output messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..reading import semconv

SHAPE_FIELDS = ("agent", "outcome", "duration_s", "tool_calls", "tool_errors", "llm_calls", "tokens",
                "steps[].tool", "steps[].ok", "steps[].error_type", "steps[].argument_names",
                "findings[].rule", "findings[].severity", "findings[].tool", "findings[].message")
CONTENT_FIELDS = ("steps[].arguments", "steps[].result", "input", "output")
MESSAGE_ATTRIBUTES = ((semconv.INPUT_MESSAGES, semconv.OI_INPUT_VALUE), (semconv.OUTPUT_MESSAGES, semconv.OI_OUTPUT_VALUE))
MAX_STEPS = 64  # the first and the last 32 of a longer run, with the count left out


def fields_sent(content: bool) -> tuple[str, ...]:
    """What the judge is sent, by field: said at start-up and in ``docs/judge.md``."""
    return SHAPE_FIELDS + (CONTENT_FIELDS if content else ())


def _cut(value: Any, limit: int = 1000) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


def _step(s: Any, content: bool) -> dict[str, Any]:
    step: dict[str, Any] = {"tool": s.tool, "ok": s.ok}
    if not s.ok and s.error_type:
        step["error_type"] = s.error_type
    try:
        args = s.arguments
    except Exception:  # noqa: BLE001 (arguments as captured may be anything)
        args = {}
    if args:
        step["argument_names"] = sorted(args)
    if content:
        step["arguments"] = _cut(s.raw_arguments)
        step["result"] = _cut(s.raw_result)
    return step


def render(t: Trajectory, findings: Sequence[Violation], content: bool) -> dict[str, Any]:
    """The run as a JSON-able dict; ``content``: argument values, results and messages too."""
    steps = list(t.steps)
    shown = steps if len(steps) <= MAX_STEPS else steps[:MAX_STEPS // 2] + steps[-MAX_STEPS // 2:]
    doc: dict[str, Any] = {
        "agent": t.agent_name, "outcome": t.outcome, "duration_s": round(t.duration_s, 3),
        "tool_calls": t.tool_calls, "tool_errors": t.tool_errors, "llm_calls": t.llm_calls,
        "tokens": {"input": t.input_tokens, "output": t.output_tokens},
        "steps": [_step(s, content) for s in shown],
        "findings": [{"rule": v.rule, "severity": v.severity, "tool": v.tool, "message": v.message[:500]}
                     for v in findings[:32]],
    }
    if len(steps) > len(shown):
        doc["steps_not_shown"] = len(steps) - len(shown)
    if content:
        attrs = t.root_attributes
        for key, names in zip(("input", "output"), MESSAGE_ATTRIBUTES):
            value = next((attrs[n] for n in names if n in attrs), None)
            if value is not None:
                doc[key] = _cut(value, 4000)
    return doc


def render_text(t: Trajectory, findings: Sequence[Violation], content: bool, max_chars: int) -> str:
    """:func:`render` as compact JSON, cut to ``max_chars`` (the oldest steps go first)."""
    doc = render(t, findings, content)
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)
    while len(text) > max_chars and len(doc["steps"]) > 2:
        doc["steps_not_shown"] = doc.get("steps_not_shown", 0) + 1
        del doc["steps"][len(doc["steps"]) // 2]
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)
    return text[:max_chars]
