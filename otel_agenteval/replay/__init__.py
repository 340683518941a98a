"""Replay recorded traces through the same engine the span processor uses.

Two calls, for the ``replay`` command and for scoring::

    from otel_agenteval.replay import iter_spans, replay

    for span in iter_spans(["traces.jsonl.gz"], strict=False, on_reject=print):
        ...  # RecordedSpan: the ReadableSpan fields the engine reads

    result = replay(["traces.jsonl", "more.pb"], policy)
    result.trajectories  # finished Trajectory objects, in the order they finished
    result.violations    # every Violation, in the order found
    result.counts        # ReadCounts: files, lines, records, spans, rejected
    result.engine_stats  # the engine's counters (late spans, evictions, ...) + "replay": held spans

``replay`` holds each trace's spans until its local root ends, then plays them through
``Engine.start``/``Engine.end`` in time order (see :mod:`.feed`), so the trajectories and
violations are the ones the live processor finds for the same spans. Held spans are bounded
(``max_held_spans``; past it a trace falls back to end-only mode, counted). At the end
``finalise_all`` runs: traces whose root never appears finish as ``incomplete``. Pass ``keep=False`` with
``on_trajectory``/``on_violation`` callbacks to stream instead of collecting (constant
memory on big inputs). Bad input is reported through ``on_reject`` (default: stderr) and
counted; ``strict=True`` raises :class:`RejectedInput` at the first bad record. A file that
cannot be read raises :class:`InputError`. Formats: see :mod:`otel_agenteval.replay.readers`.

A front door: imports the stages (``engine`` and below); imported by ``scoring``, ``receiver`` and
``cli``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.engine import Engine
from ..engine.store import SpanClock
from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from .feed import Feeder
from .readers import InputError, ReadCounts, RejectedInput, iter_batches, iter_spans
from .spanview import RecordedSpan


@dataclass
class ReplayResult:
    trajectories: list[Trajectory] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    counts: ReadCounts = field(default_factory=ReadCounts)
    engine_stats: dict[str, Any] = field(default_factory=dict)


def replay(
    paths: Iterable[str | Path],
    policy: Policy | None = None,
    *,
    strict: bool = False,
    on_reject: Callable[[str], None] | None = None,
    on_trajectory: Sequence[Callable[[Trajectory], None]] = (),
    on_violation: Sequence[Callable[[Violation], None]] = (),
    keep: bool = True,
    on_progress: Callable[[Path, int], None] | None = None,
    max_held_spans: int = 50_000,
    log_violations: bool = False,
) -> ReplayResult:
    """Read every span of ``paths`` into a fresh :class:`Engine`; return what it found."""
    policy = policy if policy is not None else Policy()
    result = ReplayResult()
    done: list[Callable[[Trajectory], None]] = list(on_trajectory)
    found: list[Callable[[Violation], None]] = list(on_violation)
    if keep:
        done.insert(0, result.trajectories.append)
        found.insert(0, result.violations.append)

    # violations come back to the caller (and out in the commands' reports): a log line each only if
    # asked, and then every one (the span clock: a recording is read at its own pace, not sampled)
    engine = Engine(policy, on_violation=found, on_finish=done, log_violations=log_violations, clock=SpanClock(),
                    one_caller=True)
    feeder = Feeder(engine, max_held_spans)
    add = feeder.add
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], 50_000), *thresholds[1:])  # parsing makes many short-lived dicts
    try:
        for batch in iter_batches(paths, strict=strict, on_reject=on_reject, counts=result.counts,
                                  on_progress=on_progress):
            add(batch)
        feeder.close()
    finally:
        gc.set_threshold(*thresholds)
    stats: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in engine.stats.items()}
    stats["late"] = int(stats["late"]) + feeder.stats["late"]
    stats["replay"] = dict(feeder.stats)
    result.engine_stats = stats
    return result


__all__ = ["InputError", "ReadCounts", "RecordedSpan", "RejectedInput", "ReplayResult", "iter_spans", "replay"]
