"""What the guard allowed that is still running: writes in flight and the confirmations promised
to them, per run, so that two calls checked at the same moment cannot both take one
confirmation, or both run one write.

A promise lives while its call runs: while its tool span is open (or ended but not yet applied
by the engine), or, when the guard was asked outside the tool span, until the engine has
recorded the write or used the confirmation, or the run has finished. Every method takes the
guard's one lock for a few list and dict operations; no rule or user code runs under it.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from ..engine.routing import Run
from ..model.trajectory import Trajectory
from ..reading.confirmations import Confirmation, Hold, hold, release

MAX_RUNS: Final = 10_000  # runs with promises kept; past it, dead ones are swept, then the oldest dropped


class Promise:
    """One allowed call still running."""

    __slots__ = ("conf", "hold", "run", "traj", "write")

    def __init__(self, run: Run, traj: Trajectory, hold: Hold, write: bool, conf: Confirmation | None) -> None:
        self.run = run
        self.traj = traj
        self.hold = hold
        self.write = write
        self.conf = conf

    def alive(self, routes: dict[int, Any]) -> bool:
        run = self.run
        if run.done:
            return False
        h = self.hold
        if h.bound:
            if h.span_id in routes:
                return True
            return any(getattr(a.span, "_context", (0, 0))[1] == h.span_id for a in list(run.inbox))
        t = run.traj or self.traj
        key = h.call_key
        if self.write and key not in t.writes_ok and key not in t.writes_failed:
            return True
        conf = self.conf
        if conf is None:
            return False
        if conf.source == "messages":
            return bool(t.extra.get("held_turns", {}).get(conf.key) is h
                        or (t.conversation is not None and t.conversation.extra.get("held_turns", {}).get(conf.key) is h))
        return conf.held is h


class Holds:
    def __init__(self, routes: dict[int, Any]) -> None:
        self._routes = routes  # the engine's span id -> run: a tool span's route lives until it ends
        self._by_run: dict[int, list[Promise]] = {}
        self._lock = threading.Lock()
        self.dropped = 0  # promises forgotten past MAX_RUNS

    def in_flight(self, run: Run, own_span: int) -> frozenset[tuple[str, str]]:
        """Call keys of this run's writes still running (not the one of ``own_span``)."""
        if not self._by_run:
            return frozenset()
        with self._lock:
            live = self._purge(run.key)
            return frozenset(p.hold.call_key for p in live if p.write and p.hold.span_id != own_span)

    def take(self, run: Run, traj: Trajectory, promise: Hold, write: bool, conf: Confirmation | None) -> bool:
        """Promise ``conf`` (if any) and the write to the call, unless another call took either since
        it was checked; ``False`` then (the caller checks again)."""
        with self._lock:
            live = self._purge(run.key)
            own = promise.span_id
            if write and any(p.write and p.hold.call_key == promise.call_key and p.hold.span_id != own for p in live):
                return False
            if conf is not None and not _free(conf, traj, promise):
                return False
            live = [p for p in live if not (own and p.hold.bound and p.hold.span_id == own)]  # asked again: replaced
            if conf is not None:
                hold(conf, promise, traj)
            live.append(Promise(run, traj, promise, write, conf))
            self._by_run[run.key] = live
            if len(self._by_run) > MAX_RUNS:
                self._sweep()
            return True

    def _purge(self, key: int) -> list[Promise]:
        promises = self._by_run.get(key)
        if not promises:
            return []
        live = [p for p in promises if p.alive(self._routes)]
        for p in promises:
            if p.conf is not None and p not in live:
                release(p.conf, p.hold, p.run.traj or p.traj)
        if live:
            self._by_run[key] = live
        else:
            del self._by_run[key]
        return live

    def _sweep(self) -> None:
        for key in list(self._by_run):
            self._purge(key)
        while len(self._by_run) > MAX_RUNS:
            key = next(iter(self._by_run))
            self.dropped += len(self._by_run.pop(key))

    def live(self) -> int:
        """Promises of calls still running (those of calls that are over are dropped first)."""
        with self._lock:
            self._sweep()
            return sum(len(v) for v in self._by_run.values())


def _free(conf: Confirmation, t: Trajectory, promise: Hold) -> bool:
    """Whether ``conf`` is still unused and not promised to another call."""
    if conf.source == "messages":
        store = t.conversation.extra if t.conversation is not None else t.extra
        if conf.key in store.get("used_turns", ()):
            return False
        held: Hold | None = store.get("held_turns", {}).get(conf.key)
    else:
        if conf.used:
            return False
        held = conf.held
    return held is None or held is promise or (held.bound and held.span_id == promise.span_id and promise.bound)


__all__ = ["MAX_RUNS", "Holds", "Promise"]
