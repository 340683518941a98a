"""Finished runs in, judgements out: the judge as a sink beside the metrics, behind a bounded queue.

``violation`` keeps each trace's findings (bounded); ``finished`` decides once, at the run's end,
whether the run is judged (:mod:`.sampling`) and queues it without waiting (:mod:`.worker`). The
judge's threads call the judge and send each result where findings go: a ``gen_ai.evaluation.result``
record on the run's root span (with evaluation events on), the ``agenteval_judge_*`` series, and
the ``on_judgement`` callbacks. Nothing here adds a violation or blocks a call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from functools import partial
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from ..metrics import catalogue as m
from ..metrics.evaluation_events import EvaluationEvents
from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.judge_section import Dimension, JudgePolicy
from .chat import ChatJudge
from .result import Judge, JudgeError, Judgement, JudgeResult, JudgeTimeout
from .sampling import Sampler
from .worker import JudgeQueue

MAX_TRACES = 4096  # traces whose findings are kept until their run finishes
MAX_FINDINGS = 32  # per trace
# why a judgement failed (agenteval_judge_errors_total's reason): the chat judge's, a callable's, a callback's
ERRORS = ("http_4xx", "http_429", "http_5xx", "unreachable", "invalid_response", "raised", "unknown_dimension",
          "callback")


class JudgeSeries:
    """The ``agenteval_judge_*`` series (metrics/catalogue.py), in the monitor's registry."""

    def __init__(self, registry: CollectorRegistry, dimensions: dict[str, Dimension]) -> None:
        def counter(d: m.Declared) -> Counter:
            return Counter(d.name, d.doc, d.labels, registry=registry)

        self.sampled, self.judged = counter(m.JUDGE_SAMPLED), counter(m.JUDGE_JUDGED)
        self.dropped, self.timeouts, self.errors = counter(m.JUDGE_DROPPED), counter(m.JUDGE_TIMEOUTS), counter(
            m.JUDGE_ERRORS)
        self.score = Histogram(m.JUDGE_SCORE.name, m.JUDGE_SCORE.doc, m.JUDGE_SCORE.labels, registry=registry,
                               buckets=m.JUDGE_SCORE.buckets)
        self.queued = Gauge(m.JUDGE_QUEUED.name, m.JUDGE_QUEUED.doc, registry=registry)
        for reason in ("sampled", "flagged"):
            self.sampled.labels(reason)
        for reason in ("queue_full", "shutdown"):
            self.dropped.labels(reason)
        for name, d in dimensions.items():  # every dimension's series from the start: a rate of 0 reads as 0
            self.timeouts.labels(name)
            self.score.labels(name)
            for label in d.labels:
                self.judged.labels(name, label)
            for reason in ERRORS:
                self.errors.labels(name, reason)


class JudgeSink:
    """``violation`` and ``finished`` sinks for an engine; results to events, series and ``on_judgement``."""

    def __init__(self, section: JudgePolicy, judge: Judge | None = None, *,
                 registry: CollectorRegistry | None = None, events: EvaluationEvents | None = None,
                 on_judgement: Sequence[Callable[[Judgement], None]] = (), wait: bool = False) -> None:
        self.section = section
        self._sampler = Sampler(section)
        self._events = events
        self._on_judgement = tuple(on_judgement)
        self._trusted = {name: d.trusted for name, d in section.dimensions.items()}
        self.series = JudgeSeries(registry if registry is not None else REGISTRY, dict(section.dimensions))
        self._findings: dict[str, list[Violation]] = {}
        self.queue = JudgeQueue(self._judge, section.queue_size,
                                section.endpoint.concurrency if section.endpoint is not None else 1,
                                wait=wait, on_dropped=lambda reason: self.series.dropped.labels(reason).inc())
        self.judge: Judge | ChatJudge = judge if judge is not None else ChatJudge(section, stop=self.queue.stopping)
        self.series.queued.set_function(lambda: self.queue.queued)

    @property
    def fields_sent(self) -> tuple[str, ...] | None:
        """What the built-in judge sends, by field (``None``: a callable of the user's, which sends what it sends)."""
        return self.judge.fields_sent if isinstance(self.judge, ChatJudge) else None

    # --- on the engine's threads: cheap, never waiting -----------------------------------------
    def violation(self, v: Violation) -> None:
        kept = self._findings.get(v.trace_id)
        if kept is None:
            if len(self._findings) >= MAX_TRACES:
                with suppress(RuntimeError, StopIteration):  # another thread changed it meanwhile: next time
                    self._findings.pop(next(iter(self._findings)), None)
            kept = self._findings.setdefault(v.trace_id, [])
        if len(kept) < MAX_FINDINGS:
            kept.append(v)

    def finished(self, t: Trajectory) -> None:
        findings = self._findings.pop(t.trace_hex, [])
        reason = self._sampler.reason(t, any(v.severity == "critical" for v in findings))
        if reason is None:
            return
        self.series.sampled.labels(reason).inc()
        self.queue.put((t, findings, reason))  # a full queue drops it, counted

    # --- on the judge's threads ----------------------------------------------------------------
    def _judge(self, job: tuple[Trajectory, list[Violation], str]) -> None:
        t, findings, reason = job
        verdict = "fail" if any(v.severity == "critical" for v in findings) else "pass"
        judge = self.judge
        if isinstance(judge, ChatJudge):  # one request per dimension: one failing spoils none of the others
            run = judge.render(t, findings)
            for name, d in judge.dimensions.items():
                self._one(name, partial(judge.dimension, name, d, run), t, reason, verdict)
        else:
            self._one(next(iter(self._trusted), "judge"), lambda: judge(t), t, reason, verdict)

    def _one(self, dimension: str, call: Callable[[], Any], t: Trajectory, reason: str, verdict: str) -> None:
        try:
            got = call()
            results = [got] if isinstance(got, JudgeResult) else list(got)
        except JudgeTimeout:
            self.series.timeouts.labels(dimension).inc()
            return
        except JudgeError as exc:
            self.series.errors.labels(dimension, exc.reason).inc()
            return
        except Exception:  # noqa: BLE001 (a judge of the user's: counted, never spread)
            self.series.errors.labels(dimension, "raised").inc()
            return
        for r in results:
            self._publish(t, r, reason, verdict)

    def _publish(self, t: Trajectory, r: JudgeResult, reason: str, verdict: str) -> None:
        name = r.name if r.name in self._trusted else None
        if name is None:  # a name the policy does not list never becomes a label
            self.series.errors.labels(next(iter(self._trusted), "judge"), "unknown_dimension").inc()
            return
        label = r.label if r.label in self.section.dimensions[name].labels else None
        self.series.judged.labels(name, label or "").inc()
        if r.score is not None:
            self.series.score.labels(name).observe(r.score)
        trusted = self._trusted[name]
        if self._events is not None:
            self._events.judgement(t, name, r.score, label, r.explanation,
                                   {"agenteval.judge.trusted": trusted, "agenteval.judge.reason": reason,
                                    "agenteval.judge.verdict": verdict})
        judgement = Judgement(t.trace_hex, t.agent_name, name, r.score, label, r.explanation, reason, verdict, trusted)
        for callback in self._on_judgement:
            try:
                callback(judgement)
            except Exception:  # noqa: BLE001 (the app's callback: counted, the others still run)
                self.series.errors.labels(name, "callback").inc()

    def close(self, timeout: float = 2.0) -> None:
        """Give queued runs ``timeout`` seconds, then stop the judge's threads (what is left is counted dropped)."""
        self.queue.close(timeout)


def judging_for(section: JudgePolicy, judge: Judge | None, registry: CollectorRegistry | None,
                events: EvaluationEvents | None, **kwargs: Any) -> JudgeSink | None:
    """The sink a door adds: ``None`` (nothing added, no cost) when no run can be judged, or there is
    neither a judge given nor an endpoint in the policy."""
    if not section.enabled or (judge is None and section.endpoint is None):
        return None
    return JudgeSink(section, judge, registry=registry, events=events, **kwargs)
