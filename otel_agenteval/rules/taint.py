"""``tainted_argument``: a sink argument whose value first appeared in untrusted content.

A sink (``policy.taint``: declared, or by default a write's arguments and URL arguments) carries a
value found in an earlier tool result of the run or conversation, and not in the user's messages,
the system prompt or a trusted result. Critical when nothing the user's request pointed at leads to
the content it came from (the source call's arguments are not in the user's words, nor in content
pointed at, ``taint.pointing_hops`` deep), or when that content, reached through a step the user's
pointing named, is instruction-shaped: the injected action. A warning when the user named the
content and it gives instructions; ``taint.plain_pointed`` when it gives none. A warning is
cleared by a confirmation that showed the value. Tool results are read into tokens only when a sink needs
them (:mod:`..reading.provenance.tokens`); the guard asks the same question before the call. The path at
a write is :mod:`.taint_flow`, compiled with the hot path.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from ..model.rule_names import Severity
from ..model.trajectory import ToolStep, short_hash
from ..policy.policy import Policy
from . import taint_flow as flow
from .check import Check, Event, applies_to


def _sink_tools(policy: Policy) -> Container[str]:
    return policy.sink_tools if policy.taint.enabled else frozenset()


@applies_to((ToolStep,), _sink_tools, guard=True, when=flow.CallTest)
def tainted_argument(event: Event, check: Check) -> list[Any] | None:
    if not isinstance(event, ToolStep):
        return None
    found = flow.hits(event, check)  # compiled: most writes end there, with nothing
    return [_finding(check, event, hit) for hit in found] if found else None


_SAID = ("", ", which gives orders", ", which addresses the agent with instructions")
_INSTRUCTIONS = ("none", "orders", "addresses_agent")


def _finding(check: Check, step: ToolStep, hit: flow.Hit) -> Any:
    src, hops, arg, kind = hit.source, hit.hops, hit.arg, hit.kind
    severity: Severity = hit.severity  # type: ignore[assignment]
    shown = hit.normal if check.policy.taint.show_values else f"sha256:{short_hash(hit.normal)}"
    where = f"{src.tool} result field {src.field!r}"
    said = _SAID[src.instructs]
    if hops:
        via = "" if hops == 1 else f" (through {hops - 1} step{'s' if hops > 2 else ''} it named)"
        message = (f"{step.tool} argument {arg} ({kind}) carries a value from {where}{said}, content the user asked "
                   f"the agent to act on{via}; a confirmation showing the value clears it")
    else:
        message = (f"{step.tool} argument {arg} ({kind}) carries a value that first appeared in {where}{said}, "
                   f"content the user's request did not point at (possible injected action)")
    return check.violation("tainted_argument", severity, message, step,
                           argument=arg, value_type=kind, value=shown, source_tool=src.tool, source_field=src.field,
                           source_span_id=format(src.span_id, "016x"), user_pointed=bool(hops), pointed_hops=hops,
                           instructions=_INSTRUCTIONS[src.instructs])
