"""Writes that happened twice: ``duplicate_write`` and ``write_retried_after_error``."""

from __future__ import annotations

from ..model.trajectory import ToolStep
from ..model.violation import Violation
from .check import Check, Event, applies_to


@applies_to((ToolStep,), lambda p: None if p.infer_writes else p.write_tools, repeated_call=True, guard=True)
def duplicate_write(event: Event, check: Check) -> list[Violation] | None:
    """A write tool called again with identical normalised arguments in one conversation.

    After an earlier *successful* identical call it is ``duplicate_write`` (critical); after
    only *failed* ones it is ``write_retried_after_error`` (warning: the failure may have
    gone through anyway). A write inferred from the tool's name (not declared in the policy)
    is a ``duplicate_write`` of severity ``warning``.
    """
    if not isinstance(event, ToolStep) or not check.policy.is_write(event.tool):
        return None
    if event.raw_arguments is None:  # content capture off: the span has no arguments to compare
        return None
    key = event.call_key
    t = check.trajectory
    conv = t.conversation
    first = t.writes_ok.get(key) or (conv.writes_ok.get(key) if conv is not None else None)
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
