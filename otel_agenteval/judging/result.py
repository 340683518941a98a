"""What a judge answers (``JudgeResult``, one per dimension) and a judgement as reported
(``Judgement``: the answer with its run, the rules' verdict on that run and why it was judged)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Union

from ..model.trajectory import Trajectory


@dataclass(frozen=True)
class JudgeResult:
    """One dimension's judgement of one run: ``name`` is the dimension, ``score`` in [0, 1]."""

    name: str
    score: float | None = None
    label: str | None = None
    explanation: str = ""


# a judge: a finished run in, one result or one per dimension out (it may raise: counted, never spread)
Judge = Callable[[Trajectory], Union[JudgeResult, Sequence[JudgeResult]]]


@dataclass(frozen=True)
class Judgement:
    """A judgement as the reports, the JSON lines and ``agreement`` read it."""

    trace_id: str
    agent: str
    dimension: str
    score: float | None
    label: str | None
    explanation: str
    reason: str  # why the run was judged: "sampled" (by trace id) or "flagged" (a critical finding)
    verdict: str  # the rules' verdict on the same run: "fail" (a critical finding) or "pass"
    trusted: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class JudgeError(Exception):
    """A judgement that could not be made; ``reason`` names why (a metric label)."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


class JudgeTimeout(JudgeError):
    def __init__(self, message: str = "timed out") -> None:
        super().__init__("timeout", message)
