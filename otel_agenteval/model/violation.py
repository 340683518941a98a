"""The one record every check produces, and every sink (metrics, logs, callbacks) receives."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from .rule_names import Severity


class Violation(BaseModel):
    """A broken invariant, found at the step (span) that broke it.

    ``message`` and ``details`` never hold argument values in clear: hashes only.
    """

    model_config = ConfigDict(frozen=True)

    rule: str
    severity: Severity
    agent: str
    tool: str | None
    trace_id: str
    span_id: str | None
    conversation_id: str | None
    message: str
    details: dict[str, Any] = {}
    service_name: str = "unknown"
