"""Never silently blind: spans that look like agent work but are read as nothing, counted by
instrumentation scope and said once per scope with what to do.

A span carrying what agent instrumentation writes (``gen_ai.*``, ``llm.*``, ``ai.*``,
``traceloop.*``, ``haystack.*``, an OpenInference kind, or under any vendor's prefix a model
call's token counts, model name, prompt or completion, a tool's name beside its input) that the extractor turns into no tool
call, model call or agent run, and that the framework table (:mod:`.frameworks`) does not know
as structure, counts in ``agenteval_unread_spans_total{scope}``. The scope is the span's
instrumentation scope name (``unknown`` for recorded spans that carry none), made safe and
bounded: past :data:`MAX_SCOPES` scopes, ``other``.

A run's pieces each arriving as a trace of their own (an instrumentation that does not propagate
context) are read, but into no run: :func:`count_fragment` counts them in
``agenteval_fragmented_spans_total{scope}``.
"""

from __future__ import annotations

from typing import Any, Final

from ..model.product_log import product_log
from . import semconv as sc
from .frameworks import looks_like_agent_work
from .labels import safe_label

MAX_SCOPES: Final = 64
UNKNOWN_SCOPE: Final = "unknown"
OTHER_SCOPE: Final = "other"

log = product_log()  # structlog as the app set it up; stderr when it did not


def scope_of(span: Any) -> str:
    scope = getattr(span, "instrumentation_scope", None)
    name = getattr(scope, "name", None)
    return safe_label(name, 120) if name else UNKNOWN_SCOPE


def count_unread(counts: dict[str, int], span: Any, attrs: dict[str, Any]) -> None:
    """Count ``span`` (read as nothing) if it looks like agent work; the first of a scope is logged."""
    name = span._name
    if not looks_like_agent_work(name, attrs):
        return
    scope = scope_of(span)
    n = counts.get(scope)
    if n is None:
        if len(counts) >= MAX_SCOPES:
            scope = OTHER_SCOPE
            n = counts.get(scope, 0)
        else:
            n = 0
            keys = sorted(k for k in attrs if "." in k)[:5]
            log.warning(f"agenteval.unread: spans of instrumentation scope {scope!r} look like agent work but are "
                        "read as no tool call, model call or agent run, so no check sees them; if they are one, "
                        "set gen_ai.operation.name (execute_tool, chat, invoke_agent) on them, or add the "
                        "framework's facts to otel_agenteval/reading/frameworks.py",
                        scope=scope, span_name=safe_label(name, 120), attribute_keys=keys,
                        attribute_prefixes=key_prefixes(attrs))
    counts[scope] = n + 1


def key_prefixes(attrs: dict[str, Any], limit: int = 5) -> list[str]:
    """The attribute keys' prefixes (up to the first dot), for saying what an unread span carries."""
    return sorted({key.split(".", 1)[0] for key in attrs if "." in key})[:limit]


# Roots that are a framework's structure (a chain, a workflow, a task): alone in their trace, a
# fragment of a run when their instrumentation also sends tool calls alone (see count_fragment).
WORKFLOW_OPERATIONS: Final = frozenset({"workflow", "invoke_workflow", "task"})


def is_workflow_root(attrs: dict[str, Any]) -> bool:
    """Whether a root span with no agent work in its trace is a framework's workflow or chain."""
    return (attrs.get(sc.OPERATION_NAME) in WORKFLOW_OPERATIONS
            or attrs.get(sc.TRACELOOP_SPAN_KIND) in WORKFLOW_OPERATIONS or attrs.get(sc.OI_SPAN_KIND) == sc.OI_CHAIN)


def count_fragment(fragmented: dict[str, int], suspects: dict[str, int], span: Any, tool_root: bool) -> None:
    """A root that looks like a piece of an agent run, alone in its trace with no agent around it:
    a tool call (``tool_root``), a model call or a workflow. Model calls and workflows alone are
    legitimate (a gateway, an app's plain LLM calls): they wait in ``suspects`` and count in
    ``fragmented`` only once their scope also sends a tool call alone, the sign that it does not
    propagate context. The first of a scope is logged."""
    scope = scope_of(span)
    n = fragmented.get(scope)
    if n is None:
        if not tool_root:
            if scope in suspects or len(suspects) < MAX_SCOPES:
                suspects[scope] = suspects.get(scope, 0) + 1
            return
        if len(fragmented) >= MAX_SCOPES:
            scope = OTHER_SCOPE
            n = fragmented.get(scope, 0)
        else:
            n = suspects.pop(scope, 0)
            log.warning(f"agenteval.fragmented: spans of instrumentation scope {scope!r} arrive one per trace (a tool "
                        "call with no agent run around it): the instrumentation is not propagating context, so no "
                        "run can be assembled and no check sees a run whole; check the app's context manager "
                        "(async context, AsyncLocalStorage in Node) and the instrumentation's version",
                        scope=scope, span_name=safe_label(span._name, 120))
    fragmented[scope] = n + 1
