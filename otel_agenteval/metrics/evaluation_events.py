"""Findings as OpenTelemetry log events on the trace: ``gen_ai.evaluation.result``.

Each violation becomes one log record, sent through the user's ``LoggerProvider`` (the Logs
API, as OTEP 4430 asks of events), parented to the span that broke the rule: a trace UI shows
it on that span. Attributes follow the GenAI semantic conventions (``gen_ai.evaluation.*``);
what the logs hash stays hashed (the conversation id) unless ``outputs.evaluation_ids_in_clear``.
Optionally one record per finished run, on its root span, with its outcome.

Runs as an ``on_violation`` / ``on_trajectory`` sink: off the span path, with no lock held.
"""

from __future__ import annotations

from typing import Any

from opentelemetry._logs import LoggerProvider, SeverityNumber, get_logger_provider
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from ..model.trajectory import Trajectory, short_hash
from ..model.violation import Violation
from ..reading.labels import safe_label

EVENT = "gen_ai.evaluation.result"
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
RUN_EVALUATION = "agenteval.trajectory"  # gen_ai.evaluation.name of the per-run record
SEVERITIES = {"critical": SeverityNumber.ERROR, "warning": SeverityNumber.WARN, "info": SeverityNumber.INFO}
VERDICTS = {"success": "pass", "failure": "fail"}  # unknown/incomplete keep their own word


def _context(trace_id: int, span_id: int) -> Any:
    """A context whose current span is (trace_id, span_id): the record's parent."""
    return set_span_in_context(NonRecordingSpan(SpanContext(trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED))))


def _hex_int(value: str | None) -> int:
    try:
        return int(value, 16) if value else 0
    except ValueError:
        return 0


class EvaluationEvents:
    """``violation`` and ``finished`` sinks that emit ``gen_ai.evaluation.result`` records."""

    def __init__(self, logger_provider: LoggerProvider | None = None, *, runs: bool = False,
                 ids_in_clear: bool = False) -> None:
        from .. import __version__

        provider = logger_provider if logger_provider is not None else get_logger_provider()
        self._logger = provider.get_logger("otel_agenteval", __version__)
        self.runs = runs
        self._ids_in_clear = ids_in_clear

    def violation(self, v: Violation) -> None:
        attrs: dict[str, Any] = {
            NAME: v.rule, SCORE_LABEL: "fail", EXPLANATION: safe_label(v.message, 2048),
            "agenteval.violation.severity": v.severity, "gen_ai.agent.name": safe_label(v.agent, 256),
        }
        if v.tool is not None:
            attrs["gen_ai.tool.name"] = safe_label(v.tool, 256)
        used = v.details.get("used")
        if isinstance(used, (int, float)) and not isinstance(used, bool):
            attrs[SCORE_VALUE] = float(used)  # a budget: what was used, against details' limit
        limit = v.details.get("limit")
        if isinstance(limit, (int, float)) and not isinstance(limit, bool):
            attrs["agenteval.budget.limit"] = float(limit)
        if v.conversation_id:
            self._conversation(attrs, v.conversation_id)
        self._emit(_hex_int(v.trace_id), _hex_int(v.span_id), SEVERITIES.get(v.severity, SeverityNumber.WARN),
                   v.severity, attrs)

    def finished(self, t: Trajectory) -> None:
        if not self.runs:
            return
        attrs: dict[str, Any] = {
            NAME: RUN_EVALUATION, SCORE_LABEL: VERDICTS.get(t.outcome, t.outcome),
            EXPLANATION: f"{t.outcome}: {t.tool_calls} tool calls, {t.llm_calls} model calls, "
                         f"{t.tool_errors} failed, {t.duration_s:.3f}s",
            "gen_ai.agent.name": safe_label(t.agent_name, 256),
        }
        if t.cost_usd:
            attrs["agenteval.trajectory.cost_usd"] = t.cost_usd
        if t.conversation_id:
            self._conversation(attrs, t.conversation_id)
        span_id = t.root.span_id if t.root is not None else 0
        self._emit(t.trace_id, span_id, SeverityNumber.INFO, "info", attrs)

    def judgement(self, t: Trajectory, name: str, score: float | None, label: str | None, explanation: str,
                  extra: dict[str, Any]) -> None:
        """A judge's result on the run's root span (``judging/sink.py``): the dimension as the evaluation's name."""
        attrs: dict[str, Any] = {NAME: name, EXPLANATION: safe_label(explanation, 2048),
                                 "gen_ai.agent.name": safe_label(t.agent_name, 256), **extra}
        if score is not None:
            attrs[SCORE_VALUE] = score
        if label is not None:
            attrs[SCORE_LABEL] = label
        if t.conversation_id:
            self._conversation(attrs, t.conversation_id)
        span_id = t.root.span_id if t.root is not None else 0
        self._emit(t.trace_id, span_id, SeverityNumber.INFO, "info", attrs)

    def _conversation(self, attrs: dict[str, Any], cid: str) -> None:
        if self._ids_in_clear:
            attrs["gen_ai.conversation.id"] = safe_label(cid, 256)
        else:
            attrs["agenteval.conversation.hash"] = short_hash(cid)

    def _emit(self, trace_id: int, span_id: int, severity: SeverityNumber, text: str, attrs: dict[str, Any]) -> None:
        # never the current context: the sink may run inside the app's own span
        context = _context(trace_id, span_id) if trace_id and span_id else Context()
        self._logger.emit(event_name=EVENT, context=context, severity_number=severity, severity_text=text,
                          attributes=attrs)


def for_policy(policy: Any, logger_provider: LoggerProvider | None) -> EvaluationEvents | None:
    """The sinks a front door adds: on with a provider given, or with ``outputs.evaluation_events``
    (then through the global provider); ``None`` (nothing added, no cost) otherwise."""
    out = policy.outputs
    if logger_provider is None and not out.evaluation_events:
        return None
    return EvaluationEvents(logger_provider, runs=out.evaluation_runs, ids_in_clear=out.evaluation_ids_in_clear)


def with_events(events: EvaluationEvents | None, on_violation: Any, on_trajectory: Any) -> tuple[tuple[Any, ...],
                                                                                                tuple[Any, ...]]:
    """The callbacks with the events' sinks appended (unchanged when there are none)."""
    on_violation, on_trajectory = tuple(on_violation), tuple(on_trajectory)
    if events is None:
        return on_violation, on_trajectory
    return (*on_violation, events.violation), (*on_trajectory, events.finished) if events.runs else on_trajectory
