"""Which finished runs a judge sees: decided by the trace id alone, so every replica, every
restart and every replay picks the same runs; a run with a critical finding always, with
``include_flagged``. A run sampled at a rate is sampled at every higher rate too."""

from __future__ import annotations

import hashlib

from ..model.trajectory import Trajectory
from ..policy.judge_section import JudgePolicy

_SPAN = float(1 << 64)


def sample_point(trace_hex: str) -> float:
    """The trace's place in [0, 1): a hash of its 32 hex digits (trace ids need not be random)."""
    digest = hashlib.blake2b(trace_hex.lower().encode("ascii", "replace"), digest_size=8,
                             person=b"agenteval-judge").digest()
    return int.from_bytes(digest, "big") / _SPAN


class Sampler:
    """``reason(run, flagged)``: ``"flagged"``, ``"sampled"`` or ``None`` (not judged)."""

    def __init__(self, section: JudgePolicy) -> None:
        self._rate = section.rate
        self._agents = dict(section.agents)
        self._flagged = section.include_flagged

    def reason(self, t: Trajectory, flagged: bool) -> str | None:
        if flagged and self._flagged:
            return "flagged"
        rate = self._agents.get(t.agent_name, self._rate)
        if rate > 0 and sample_point(t.trace_hex) < rate:
            return "sampled"
        return None
