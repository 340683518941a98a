"""Scored runs kept out of memory: each run's detail spooled to a temporary file as it is scored.

A big input has a hundred thousand runs; their per-step tables would not fit the memory the
replay keeps constant. What the summaries need (verdict, trial, cost, latency, length) stays in
a small :class:`RunRecord`; the rest is one JSON line in the spool, read back when reported.
"""

from __future__ import annotations

import tempfile
from typing import IO, Any

import orjson

from .run_score import RunScore


class RunRecord:
    """One scored run: the numbers the summaries use, and where its detail is in the spool."""

    __slots__ = ("_at", "_size", "_store", "argument_accuracy", "cost_usd", "coverage", "duplicate_writes", "duration_s",
                 "extra_steps", "recovered", "redundant_calls", "reference_steps", "run_steps", "tool_errors", "trial",
                 "verdict")

    def __init__(self, score: RunScore, store: RunStore, at: int, size: int) -> None:
        self.trial = score.trial
        self.verdict = score.verdict
        self.cost_usd = score.cost_usd
        self.duration_s = score.duration_s
        self.run_steps = score.run_steps
        self.reference_steps = score.reference_steps
        self.tool_errors = score.tool_errors
        self.recovered = score.recovered
        self.redundant_calls = score.redundant_calls
        self.coverage = score.coverage  # the four numbers, for the summary's means
        self.argument_accuracy = score.argument_accuracy
        self.extra_steps = score.extra_steps
        self.duplicate_writes = score.duplicate_writes
        self._store = store
        self._at = at
        self._size = size

    @property
    def passed(self) -> bool:
        return self.verdict != "fail"

    def to_dict(self, show_arguments: bool = False) -> dict[str, Any]:
        """The run as :meth:`RunScore.to_dict` gave it when scored (``show_arguments`` fixed then)."""
        return self._store.read(self._at, self._size)

    def json_text(self) -> str:
        """The same as compact JSON text, straight from the spool (no parse, no re-encode)."""
        return self._store.raw(self._at, self._size).decode()


def run_json(run: dict[str, Any]) -> bytes:
    """A run's detail as compact JSON, the one encoding of spooled and streamed runs: a value JSON
    has no type for is written as its text, a non-string key as its text."""
    return orjson.dumps(run, default=str, option=orjson.OPT_NON_STR_KEYS)


class RunStore:
    """An append-only spool of run details (a temporary file, deleted on close)."""

    def __init__(self, show_arguments: bool = False) -> None:
        self.show_arguments = show_arguments
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="agenteval-score-")  # noqa: SIM115 (closed by close())
        self._end = 0
        self._pos = 0  # where the file's position is now

    def add(self, score: RunScore) -> RunRecord:
        data = run_json(score.to_dict(self.show_arguments))
        at = self._end
        self._seek(at)
        self._file.write(data)
        self._end = self._pos = at + len(data)
        return RunRecord(score, self, at, len(data))

    def raw(self, at: int, size: int) -> bytes:
        self._seek(at)
        data = self._file.read(size)
        self._pos = at + len(data)
        return data

    def _seek(self, at: int) -> None:
        if self._pos != at:  # appends in a row, and reads in order, need none (a seek flushes the buffer)
            self._file.seek(at)
            self._pos = at

    def read(self, at: int, size: int) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.raw(at, size))
        return value

    def close(self) -> None:
        self._file.close()
