"""Where findings go: logs, ``on_violation`` callbacks (metrics first), ``on_finish`` callbacks.

Run with no lock held, on the thread that applied the event. A span that a sink makes (an
instrumented client in a callback) is the sink's, not the agent's: :mod:`._threadstate`
marks the thread while they run, and the engine drops such spans, counted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..model.product_log import LineSampling, product_log
from ..model.trajectory import Trajectory, short_hash
from ..model.violation import Violation
from ..policy.sections import OutputsPolicy
from ..reading.labels import safe_label
from .errors import caught
from .store import ProcessClock, SpanClock
from .threadstate import enter, leave

log = product_log()  # structlog as the app set it up; stderr when it did not

def _renew_write_locks() -> None:
    """In a forked child: structlog's write lock per file (its ``PrintLogger``'s, the default and
    serve's), which a thread of the parent may have held at the fork, made new in place, so the
    child's first violation log cannot wait on it forever (``logging`` renews its handlers' own)."""
    try:
        from structlog import _output

        for lock in list(_output.WRITE_LOCKS.values()):
            renew = getattr(lock, "_at_fork_reinit", None)
            if renew is not None:
                renew()
    except Exception:  # noqa: BLE001 - another structlog: nothing to renew, never fail the fork
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_write_locks)

Sink = Callable[[Violation], None]
FinishSink = Callable[[Trajectory], None]


class Sinks:
    def __init__(self, on_violation: Sequence[Sink], on_finish: Sequence[FinishSink],
                 on_trajectory: Sequence[FinishSink], log_violations: bool, outputs: OutputsPolicy,
                 stats: dict[str, Any], clock: ProcessClock | SpanClock) -> None:
        self._on_violation = tuple(on_violation)
        # a finished run goes to the monitor's own sinks (the metrics; errors: stage "finish"),
        # then to the app's callbacks (stage "callback"), each on its own so one broken one starves none
        self._on_finish = tuple((done, "finish") for done in on_finish) + tuple(
            (done, "callback") for done in on_trajectory)
        self._log_violations = log_violations  # off where violations are reported otherwise (replay)
        self._errors: dict[str, int] = stats["errors"]
        # the violations' log lines, and the guard's (Guard takes it), sampled on the engine's clock as the
        # policy says; not on a recording's (replay), read at its own pace: each line asked for is written
        sampling = outputs.log_sampling
        sampled = sampling.enabled and type(clock) is not SpanClock
        self.lines = LineSampling(stats["log_lines_dropped"], partial(clock.now, 0) if sampled else None,
                                  sampling.initial, sampling.thereafter, round(sampling.tick_s * 1e9))

    def deliver(self, violations: Sequence[Violation], finished: Trajectory | None) -> None:
        enter()  # a span the sinks make is theirs, not the agent's
        try:
            for v in violations:
                if self._log_violations:
                    self._log(v)
                for cb in self._on_violation:
                    try:
                        cb(v)
                    except BaseException:  # even SystemExit/KeyboardInterrupt: never out of span.end()
                        caught(self._errors, "callback")
            if finished is not None:
                for done, stage in self._on_finish:
                    try:
                        done(finished)
                    except BaseException:
                        caught(self._errors, stage)
        finally:
            leave()

    def _log(self, v: Violation) -> None:
        try:
            dropped = self.lines.admit("agenteval.violation", v.rule, v.service_name, v.agent, v.tool)
            if dropped is None:
                return  # sampled out, counted
            # names come from spans: made printable and bounded, so a log line cannot be forged
            details = {k: safe_label(x, 256) if isinstance(x, str) else x for k, x in v.details.items()}
            fields = {"rule": v.rule, "severity": v.severity, "agent": safe_label(v.agent, 256),
                      "tool": safe_label(v.tool, 256) if v.tool is not None else None,
                      "trace_id": v.trace_id, "span_id": v.span_id,
                      "service_name": safe_label(v.service_name, 256) if v.service_name is not None else None,
                      "conversation": short_hash(v.conversation_id) if v.conversation_id else None,
                      **details}
            fields = {k: x for k, x in fields.items() if x is not None}  # no "tool=None" in a log line
            if dropped:
                fields["lines_dropped"] = dropped  # of this kind, since the last one written
            log.warning(f"agenteval.violation: {safe_label(v.message, 2048)}", **fields)
        except BaseException:  # the app's logging set-up is user code too
            caught(self._errors, "callback")
