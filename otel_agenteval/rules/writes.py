"""Writes that happened twice: ``duplicate_write`` and ``write_retried_after_error``."""

from __future__ import annotations

import json
from typing import Any

from ..model.trajectory import ToolStep, Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from ..reading.span_values import result_text
from .check import Check, Event, applies_to


def _field(step: ToolStep, key: str) -> Any:
    """``key`` of a call: its argument, else a field of its (JSON object) result."""
    if key in step.arguments:
        return step.arguments[key]
    text = result_text(step.raw_result)
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    return data.get(key) if isinstance(data, dict) else None


def undone(step: ToolStep, t: Trajectory, policy: Policy) -> bool:
    """Whether the latest identical successful call of this write, in this run, was undone
    since by a tool the policy declares its undo (``undoes: {tool, key}``) on the same key."""
    undos = [(name, tp.undoes.key) for name, tp in policy.tools.items()
             if tp.undoes is not None and tp.undoes.tool == step.tool]
    if not undos:
        return False
    key = step.call_key
    prev = next((s for s in reversed(t.steps) if s.ok and s.tool == step.tool and s is not step
                 and s.raw_arguments is not None and s.call_key == key), None)
    if prev is None:
        return False
    for name, field in undos:
        value = _field(prev, field)
        if value is not None and any(s.ok and s.tool == name and s.start_ns >= prev.end_ns
                                     and s.arguments.get(field) == value for s in t.steps):
            return True
    return False


@applies_to((ToolStep,), lambda p: None if p.infer_writes else p.write_tools, repeated_call=True, guard=True)
def duplicate_write(event: Event, check: Check) -> list[Violation] | None:
    """A write tool called again with identical normalised arguments in one conversation.

    After an earlier *successful* identical call it is ``duplicate_write`` (critical); after
    only *failed* ones it is ``write_retried_after_error`` (warning: the failure may have
    gone through anyway). A write inferred from the tool's name (not declared in the policy)
    is a ``duplicate_write`` of severity ``warning``. A write redone after its declared undo
    (``undoes``) on the same key, in the same run, is neither: book, cancel, book again.
    """
    if not isinstance(event, ToolStep) or not check.policy.is_write(event.tool):
        return None
    if event.raw_arguments is None:  # content capture off: the span has no arguments to compare
        return None
    key = event.call_key
    t = check.trajectory
    conv = t.conversation
    first = t.writes_ok.get(key) or (conv.writes_ok.get(key) if conv is not None else None)
    if first is not None and undone(event, t, check.policy):
        return None
    if first is not None:
        where = "this run" if first == t.trace_hex else f"trace {first}"
        return [
            check.violation(
                "duplicate_write",
                "critical" if event.tool in check.policy.write_tools else "warning",
                f"{event.tool} called again with identical arguments after a successful call in {where}",
                event,
                first_trace_id=first,
            )
        ]
    preview = check.preview
    if preview is not None and key in preview.in_flight:  # the guard allowed the same call, still running
        return [check.violation("duplicate_write", "critical",
                                f"{event.tool} called again with identical arguments while that call is still running",
                                event, first_trace_id=t.trace_hex)]
    failed = t.writes_failed.get(key) or (conv.writes_failed.get(key) if conv is not None else None)
    if failed is not None:
        return [
            check.violation(
                "write_retried_after_error",
                "warning",
                f"{event.tool} retried with identical arguments after a failed call; the failed one may have gone through",
                event,
                first_trace_id=failed,
            )
        ]
    return None
