"""Never silently blind: spans that look like agent work but are read as nothing, counted by
instrumentation scope and said once per scope with what to do.

A span carrying what agent instrumentation writes (``gen_ai.*``, ``llm.*``, ``ai.*``,
``traceloop.*``, ``haystack.*``, an OpenInference kind, or under any vendor's prefix a model
call's token counts, model name, prompt or completion, a tool's name beside its input) that the extractor turns into no tool
call, model call or agent run, and that the framework table (:mod:`.frameworks`) does not know
as structure, counts in ``agenteval_unread_spans_total{scope}``. The scope is the span's
instrumentation scope name (``unknown`` for recorded spans that carry none), made safe and
bounded: past :data:`MAX_SCOPES` scopes, ``other``.
"""

from __future__ import annotations

from typing import Any, Final

from ..model.product_log import product_log
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
