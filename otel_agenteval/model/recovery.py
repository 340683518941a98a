"""What an agent did after a tool error: retried the same call, tried another, or gave up.

Pure: a trajectory's ordered tool steps in, one :class:`Recovery` per failed step out. Used by
the online counter (``agenteval_tool_error_recoveries_total``, in ``metrics.py``) and by
``score`` (recovery rate per run and per case), so both count the same thing.

For a failed step, with the steps after it:

- ``gave_up``: no later call succeeded (the run ended, or answered without a successful call);
- ``retried_same``: the next call is the identical call (same tool, same normalised arguments);
  ``retry_ok`` says whether that retry succeeded;
- ``tried_other``: the next call is a different one.

The recovery rate is ``(tried_other + successful retries) / errors``. Redundancy
(:func:`repeated_calls`): calls repeating an earlier successful identical call.
"""

from __future__ import annotations

from collections.abc import Sequence

from .steps import ToolStep  # typed: the compiled build reads a step's fields directly

RETRIED_SAME = "retried_same"
TRIED_OTHER = "tried_other"
GAVE_UP = "gave_up"
NEXT = (RETRIED_SAME, TRIED_OTHER, GAVE_UP)
# the online counter's ``next`` label: a retry is split by its own outcome, so the rate can be read
LABELS = ("retried_same_ok", "retried_same_failed", TRIED_OTHER, GAVE_UP)


class Recovery:
    """One failed step and what came next."""

    __slots__ = ("index", "next", "retry_ok", "tool")

    def __init__(self, index: int, tool: str, next: str, retry_ok: bool = False) -> None:  # noqa: A002
        self.index = index  # position of the failed step in the trajectory (0-based)
        self.tool = tool
        self.next = next
        self.retry_ok = retry_ok

    @property
    def recovered(self) -> bool:
        """Counts towards the recovery rate: another call, or a retry that succeeded."""
        return self.next == TRIED_OTHER or (self.next == RETRIED_SAME and self.retry_ok)

    @property
    def label(self) -> str:
        """The counter's ``next`` label value."""
        if self.next == RETRIED_SAME:
            return "retried_same_ok" if self.retry_ok else "retried_same_failed"
        return self.next

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recovery) and (self.index, self.tool, self.next, self.retry_ok) == (
            other.index, other.tool, other.next, other.retry_ok)

    def __hash__(self) -> int:
        return hash((self.index, self.tool, self.next, self.retry_ok))

    def __reduce__(self) -> tuple[object, ...]:  # copy and pickle in the compiled build too
        return (Recovery, (self.index, self.tool, self.next, self.retry_ok))

    def __repr__(self) -> str:
        return f"Recovery({self.index}, {self.tool!r}, {self.next!r}, retry_ok={self.retry_ok})"


def recoveries(steps: Sequence[ToolStep]) -> list[Recovery]:
    """One :class:`Recovery` per failed step of ``steps`` (a trajectory's tool steps), in order.
    Arguments are compared (``call_key``) only where a failed step is followed by a call to the
    same tool."""
    n = len(steps)
    out: list[Recovery] = []
    later_ok = False  # some step after position i succeeded (filled from the end)
    ok_after = [False] * n
    for i in range(n - 1, -1, -1):
        ok_after[i] = later_ok
        if steps[i].ok:
            later_ok = True
    for i in range(n):
        s = steps[i]
        if s.ok:
            continue
        if not ok_after[i]:
            out.append(Recovery(i, s.tool, GAVE_UP))
            continue
        nxt = steps[i + 1]
        if nxt.tool == s.tool and nxt.call_key == s.call_key:
            out.append(Recovery(i, s.tool, RETRIED_SAME, bool(nxt.ok)))
        else:
            out.append(Recovery(i, s.tool, TRIED_OTHER))
    return out


def recovery_rate(found: Sequence[Recovery]) -> float | None:
    """``(tried_other + successful retries) / errors``; ``None`` without errors."""
    if not found:
        return None
    return sum(1 for r in found if r.recovered) / len(found)


def repeated_calls(calls: Sequence[ToolStep]) -> int:
    """Calls repeating an earlier *successful* identical call (same tool and normalised arguments)
    of the run: a retry after an error is recovery, not redundancy. Arguments are compared only
    for tools called more than once."""
    tools: set[str] = set()
    again: set[str] = set()
    for c in calls:
        if c.tool in tools:
            again.add(c.tool)
        tools.add(c.tool)
    if not again:
        return 0
    seen: set[tuple[str, str]] = set()
    n = 0
    for c in calls:
        if c.tool in again:
            key = c.call_key
            if key in seen:
                n += 1
            elif c.ok:
                seen.add(key)
    return n
