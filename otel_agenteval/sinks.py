"""Where findings go: logs, ``on_violation`` callbacks (metrics first), ``on_finish`` callbacks.

Run with no lock held, on the thread that applied the event. A span that a sink makes (an
instrumented client in a callback) is the sink's, not the agent's: :data:`.dispatch.guard`
marks the thread while they run, and the engine drops such spans, counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from .dispatch import guard
from .trajectory import Trajectory, short_hash
from .violation import Violation

log = structlog.get_logger("otel_agenteval")

Sink = Callable[[Violation], None]
FinishSink = Callable[[Trajectory], None]


class Sinks:
    def __init__(self, on_violation: Sequence[Sink], on_finish: Sequence[FinishSink], log_violations: bool,
                 errors: dict[str, int]) -> None:
        self._on_violation = tuple(on_violation)
        self._on_finish = tuple(on_finish)
        self._log_violations = log_violations  # off where violations are reported otherwise (replay)
        self._errors = errors

    def deliver(self, violations: Sequence[Violation], finished: Trajectory | None) -> None:
        guard.active = True  # a span the sinks make is theirs, not the agent's
        try:
            for v in violations:
                if self._log_violations:
                    self._log(v)
                for cb in self._on_violation:
                    try:
                        cb(v)
                    except Exception:
                        self._errors["callback"] += 1
            if finished is not None:
                for done in self._on_finish:
                    try:
                        done(finished)
                    except Exception:
                        self._errors["finish"] += 1
        finally:
            guard.active = False

    def _log(self, v: Violation) -> None:
        try:
            fields = {"rule": v.rule, "severity": v.severity, "agent": v.agent, "tool": v.tool,
                      "trace_id": v.trace_id, "span_id": v.span_id, "service_name": v.service_name,
                      "conversation": short_hash(v.conversation_id) if v.conversation_id else None,
                      **v.details}
            log.warning(f"agenteval.violation: {v.message}", **fields)
        except Exception:
            self._errors["callback"] += 1
