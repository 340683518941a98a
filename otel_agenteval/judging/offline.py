"""``replay --judge`` and ``score --judge``: the same sampling on recorded traces, every sampled run
judged (the queue waits instead of dropping), and the judgements as a report section and JSON lines.
"""

from __future__ import annotations

import argparse
import importlib
import json
from typing import IO, Any

from ..policy.config_file import ConfigError
from ..policy.policy import Policy
from .result import Judge, Judgement

POLICY = "policy"  # --judge with no value: the policy's judge.endpoint


class JudgeSetupError(ConfigError):
    what = "cannot judge"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", nargs="?", const=POLICY, metavar="MODULE:ATTR",
                   help="judge the runs the policy's judge section samples (by trace id, as live), with its "
                        "endpoint or a callable MODULE:ATTR; never changes the exit status")
    p.add_argument("--judgements", metavar="FILE", help="with --judge: the judgements as JSON lines (for `agreement`)")


class OfflineJudging:
    """A :class:`JudgeSink` that judges every sampled run, and what it judged."""

    def __init__(self, policy: Policy, judge: str, source: str = "--judge") -> None:
        section = policy.judge
        if not section.dimensions:
            raise JudgeSetupError(source, ["the policy has no judge section with dimensions (docs/judge.md)"])
        if judge == POLICY and section.endpoint is None:
            raise JudgeSetupError(source, ["the policy's judge section has no endpoint (or give --judge MODULE:ATTR)"])
        from prometheus_client import CollectorRegistry

        from .sink import JudgeSink  # the judge's threads and HTTP client: only when --judge is given

        fn = None if judge == POLICY else load_judge(judge, source)
        self.judgements: list[Judgement] = []
        self.registry = CollectorRegistry()
        self.sink = JudgeSink(section, fn, registry=self.registry, on_judgement=[self.judgements.append], wait=True)

    def finish(self) -> list[Judgement]:
        """Wait for every queued run, stop the judge's threads; the judgements by trace and dimension."""
        self.sink.queue.drain()
        self.sink.close(0)
        self.judgements.sort(key=lambda j: (j.trace_id, j.dimension))
        return self.judgements

    def counts(self) -> dict[str, Any]:
        def total(name: str) -> int:
            return int(sum(s.value for metric in self.registry.collect() if metric.name == name
                           for s in metric.samples if s.name == name + "_total"))

        reasons = {r: int(self.registry.get_sample_value("agenteval_judge_sampled_total", {"reason": r}) or 0)
                   for r in ("sampled", "flagged")}
        return {"rate": self.sink.section.rate, "sampled": reasons["sampled"], "flagged": reasons["flagged"],
                "judgements": len(self.judgements), "timeouts": total("agenteval_judge_timeouts"),
                "errors": total("agenteval_judge_errors"), "fields_sent": list(self.sink.fields_sent or ())}

    def write(self, path: str | None, fmt: str, out: IO[str]) -> dict[str, Any]:
        """The table section (``fmt`` table) and the JSON lines file; the JSON document's part returned."""
        counts = self.counts()
        if path:
            with open(path, "w", encoding="utf-8") as f:
                for j in self.judgements:
                    f.write(json.dumps(j.to_dict()) + "\n")
        part = {"summary": counts, "judgements": [j.to_dict() for j in self.judgements]}
        if fmt == "table":
            out.write(table(part) + "\n")
        return part


def table(part: dict[str, Any]) -> str:
    """The report's judge section: one line of counts, then a row per judgement."""
    counts, judgements = part["summary"], part["judgements"]
    lines = [f"judge: {counts['sampled'] + counts['flagged']} runs sampled (rate {counts['rate']:g} by trace id, "
             f"{counts['flagged']} flagged), {counts['judgements']} judgements, {counts['timeouts']} timed out, "
             f"{counts['errors']} failed; informs, never gates"]
    if judgements:
        lines.append(f"  {'TRACE':32}  {'AGENT':16}  {'DIMENSION':20}  {'SCORE':>5}  {'LABEL':8}  RULES  TRUSTED")
    for j in judgements:
        score = "" if j["score"] is None else f"{j['score']:.2f}"
        lines.append(f"  {j['trace_id']:32}  {j['agent'][:16]:16}  {j['dimension'][:20]:20}  {score:>5}  "
                     f"{(j['label'] or '')[:8]:8}  {j['verdict']:5}  {'yes' if j['trusted'] else 'no'}")
    return "\n".join(lines)


def load_judge(ref: str, source: str) -> Judge:
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise JudgeSetupError(source, [f"{ref!r}: must be 'module:attr' (a callable: trajectory -> JudgeResult)"])
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise JudgeSetupError(source, [f"{ref!r}: cannot import: {exc}"]) from None
    if not callable(fn):
        raise JudgeSetupError(source, [f"{ref!r}: not callable"])
    return fn  # type: ignore[no-any-return]
