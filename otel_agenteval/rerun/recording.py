"""Recorded conversations read from trace files: the user turns and the tool observations to serve.

Every run of the files is replayed through the engine (:func:`otel_agenteval.replay.replay`, so
the recorded runs' violations, steps and cost are the ones ``replay`` reports), then runs are
grouped by ``gen_ai.conversation.id`` (a run without one is a conversation of its own) and ordered
by start. A user turn is the last user message of the earliest model call (or agent span) of the
run that captured its input messages; ``None`` when content was not captured. The files are only
read: nothing here writes to them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.routing import FRAMEWORK_SPAN
from ..model.arguments import parse_arguments
from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from ..reading.content import messages_of
from ..reading.frameworks import capture_setting
from ..replay import iter_spans, replay


@dataclass(frozen=True)
class Finding:
    """A violation as the report compares it: rule, severity, tool and the step it broke at."""

    rule: str
    severity: str
    tool: str | None = None
    step: int | None = None  # 1-based in its conversation; None for a run-level finding

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "tool": self.tool, "step": self.step}


@dataclass(frozen=True)
class RecordedCall:
    """One recorded tool call and its observation: the result, or the error where it failed."""

    tool: str
    arguments: dict[str, Any]  # normalised (as the engine's call keys)
    raw_arguments: Any
    result: Any
    ok: bool
    error: str | None = None
    parallel: bool = False  # started before the previous call ended: the two may come in either order


@dataclass
class RecordedRun:
    """One recorded agent run (a user turn): what the candidate is fed and compared against."""

    trace_id: str
    agent_name: str
    service_name: str
    user_text: str | None
    calls: list[RecordedCall]
    attributes: dict[str, Any]  # the root span's scalar attributes (case id, trial, ...)
    outcome: str
    cost_usd: float
    llm_calls: int
    findings: list[Finding] = field(default_factory=list)
    missing_content: str | None = None  # why it cannot be rerun: the framework and its setting


@dataclass
class RecordedConversation:
    """The runs of one conversation, in order; ``id`` is ``gen_ai.conversation.id`` or ``trace:HEX``."""

    id: str
    runs: list[RecordedRun]

    @property
    def steps(self) -> int:
        return sum(len(r.calls) for r in self.runs)

    @property
    def cost_usd(self) -> float:
        return sum(r.cost_usd for r in self.runs)

    @property
    def missing_content(self) -> str | None:
        return next((r.missing_content for r in self.runs if r.missing_content), None)


def _calls(steps: list[Any]) -> list[RecordedCall]:
    out: list[RecordedCall] = []
    end = 0
    for step in steps:
        out.append(RecordedCall(tool=step.tool, arguments=parse_arguments(step.raw_arguments),
                                raw_arguments=step.raw_arguments, result=step.raw_result, ok=bool(step.ok),
                                error=None if step.ok else (step.error_type or "error"),
                                parallel=bool(out) and step.start_ns < end))
        end = max(end, step.end_ns)
    return out


def _missing(t: Trajectory) -> str | None:
    """The framework and setting, when a tool call carries no arguments or a good one no result."""
    if t.steps_dropped:
        return f"{t.steps_dropped} tool calls not kept by the engine (more than its per-run bound)"
    for step in t.steps:
        if step.raw_arguments is None or (step.ok and step.raw_result is None):
            scope = getattr(step, "scope", None)
            framework, setting = capture_setting(None, t.root_attributes, getattr(scope, "name", None),
                                                 t.extra.get(FRAMEWORK_SPAN))
            return f"tool results not captured ({framework}: {setting})"
    return None


def _scalars(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if isinstance(v, (str, int, float, bool))}


def _user_turns(paths: list[Path]) -> dict[int, str]:
    """trace id -> the user's text of that run (the earliest span with captured input messages)."""
    found: dict[int, tuple[int, str]] = {}
    for span in iter_spans(paths, on_reject=lambda _msg: None):
        attrs = span.attributes or {}
        if not attrs or not any(k.startswith(("gen_ai.input", "llm.input")) for k in attrs) and not span.events:
            continue
        messages = messages_of(span)
        users = [m.text for m in messages or () if m.role == "user" and m.text]
        if not users:
            continue
        trace_id = span.context.trace_id
        start = span.start_time or 0
        if trace_id not in found or start < found[trace_id][0]:
            found[trace_id] = (start, users[-1])
    return {k: v[1] for k, v in found.items()}


def read_conversations(paths: Iterable[str | Path], policy: Policy | None = None,
                       on_reject: Callable[[str], None] | None = None) -> list[RecordedConversation]:
    """The recorded conversations of ``paths`` (any format ``replay`` reads), in order of first start.
    A bad line or span is reported through ``on_reject`` (default: standard error, as ``replay``)
    and skipped; a file that cannot be read raises ``InputError``."""
    files = [Path(p) for p in paths]
    by_trace: dict[str, list[Violation]] = {}
    result = replay(files, policy, on_reject=on_reject,
                    on_violation=[lambda v: by_trace.setdefault(v.trace_id, []).append(v)])
    turns = _user_turns(files)
    groups: dict[str, list[Trajectory]] = {}
    for t in sorted(result.trajectories, key=lambda t: t.started_ns):
        groups.setdefault(t.conversation_id or f"trace:{t.trace_hex}", []).append(t)
    conversations = []
    for conv_id, runs in groups.items():
        recorded, offset = [], 0
        for t in runs:
            where = {format(s.span_id, "016x"): offset + i + 1 for i, s in enumerate(t.steps)}
            findings = [Finding(v.rule, v.severity, v.tool, where.get(v.span_id or "")) for v in by_trace.get(t.trace_hex, ())]
            recorded.append(RecordedRun(
                trace_id=t.trace_hex, agent_name=t.agent_name, service_name=t.service_name,
                user_text=turns.get(t.trace_id), calls=_calls(t.steps),
                attributes=_scalars(t.root_attributes), outcome=t.outcome, cost_usd=t.cost_usd,
                llm_calls=t.llm_calls, findings=findings, missing_content=_missing(t)))
            offset += len(t.steps)
        conversations.append(RecordedConversation(conv_id, recorded))
    return conversations


__all__ = ["Finding", "RecordedCall", "RecordedConversation", "RecordedRun", "read_conversations"]
