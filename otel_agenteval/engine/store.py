"""The bounded state of the engine: open runs, runs keyed by trace, finished traces, conversations.

Every method runs under :attr:`Store.lock`, the engine's one lock, and does bookkeeping only
(no rules, no user code).
Expiry goes by the engine's clock (:class:`ProcessClock`: the process's monotonic clock, or
:class:`SpanClock` for recorded traces), never by the largest span time seen: one span dated a
century ahead must not switch expiry off. Capacity eviction is roughly least-recently-seen
(second chance, no reordering per span); TTL eviction is exact. Every drop is counted.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from ..model.trajectory import Conversation, short_hash
from ..policy.policy import Limits as PolicyLimits
from .routing import FINISH, Arrival, Run

SWEEP_NS: Final = 1_000_000_000  # expiry is looked at once a second of the engine's clock
MAX_ID_LEN: Final = 256  # longer conversation ids are kept as a prefix and a hash
FUTURE_NS: Final = 86_400 * 1_000_000_000  # a recorded span more than a day past the wall clock is absurd


class ProcessClock:
    """The process's monotonic clock in ns (injectable for tests); span times are ignored.

    ``span_now`` dates an eviction in span time (the wall clock, in which the SDK dates spans);
    with an injected clock, the injected one (tests date their spans by it)."""

    __slots__ = ("_read", "_wall")

    def __init__(self, read: Callable[[], float] | None = None) -> None:  # floats too: made ints once
        if read is None:
            self._read: Callable[[], int] = time.monotonic_ns
            self._wall: Callable[[], int] = time.time_ns
        else:  # an injected clock may give floats: made ints here, not on every span
            self._read = self._wall = lambda: int(read())

    def now(self, span_end_ns: int) -> int:
        return self._read()

    def span_now(self) -> int:
        return self._wall()


class SpanClock:
    """For recorded traces: the latest span end seen, with absurd times (future) not taken, counted."""

    __slots__ = ("_latest", "_now", "skewed")

    def __init__(self) -> None:
        self._now = 0
        self._latest = time.time_ns() + FUTURE_NS  # the latest end taken (a day past the wall clock)
        self.skewed = 0  # spans whose end was past the wall clock (not moving the clock)

    def now(self, span_end_ns: int) -> int:
        if span_end_ns > self._now:
            if span_end_ns > self._latest:  # past the bound read last: read the wall clock again
                self._latest = time.time_ns() + FUTURE_NS
            if span_end_ns > self._latest:
                self.skewed += 1
            else:
                self._now = span_end_ns
        return self._now

    def span_now(self) -> int:
        return self._now


def conversation_key(cid: Any) -> str:
    """A conversation id as the store keeps it: bounded in length (a long id keeps a prefix and its hash)."""
    text = cid if isinstance(cid, str) else str(cid)
    return text if len(text) <= MAX_ID_LEN else text[:64] + "~" + short_hash(text)


class Store:
    def __init__(self, limits: PolicyLimits, stats: dict[str, Any]) -> None:
        self.max_open = limits.max_open_trajectories
        self.ttl_ns = int(limits.trajectory_ttl_s * 1e9)
        self.conv_ttl_ns = int(limits.conversation_ttl_s * 1e9)
        self.max_conversations = limits.max_conversations
        self.late_memory = limits.late_memory
        self.stats = stats
        self.open: OrderedDict[int, Run] = OrderedDict()  # runs with a trajectory, in queued order
        self.by_trace: dict[int, Run] = {}  # runs keyed by trace (spans that came with no route)
        self.done_traces: OrderedDict[int, None] = OrderedDict()  # recently finished: later spans are late
        self.conversations: OrderedDict[str, Conversation] = OrderedDict()
        self.next_sweep = 0
        self.lock = threading.Lock()  # the engine's one lock: every method here runs under it
        self.victims: list[Run] = []  # evicted runs, finalised by the engine once the lock is released

    def evict(self, run: Run, reason: str, span_now: int) -> None:
        """``run`` (already out of the store) is to be finalised early, as of ``span_now``."""
        run.inbox.append(Arrival(FINISH, None, None, {}, span_now, reason=reason))
        self.victims.append(run)

    def admit(self, run: Run, now: int) -> Run | None:
        """Keep ``run`` open; return the run evicted to make room (its finalisation is the caller's)."""
        victim = self._least_recently_seen() if len(self.open) >= self.max_open else None
        run.queued_at = run.seen_at = now
        self.open[run.key] = run
        return victim

    def _least_recently_seen(self) -> Run | None:
        """One seen since it was queued goes to the back once; the first one not seen since is taken."""
        open_ = self.open
        while open_:
            key, run = open_.popitem(last=False)
            if run.seen_at != run.queued_at:
                run.queued_at = run.seen_at
                open_[key] = run
                continue
            self._close(run)
            return run
        return None

    def expired(self, now: int) -> list[Run]:
        """Runs idle past their TTL (taken out, for the caller to finalise); conversations past theirs dropped."""
        self.next_sweep = now + SWEEP_NS
        out: list[Run] = []
        open_ = self.open
        limit = now - self.ttl_ns
        while open_:
            run = next(iter(open_.values()))
            if run.seen_at >= limit:
                if run.seen_at == run.queued_at:
                    break  # not seen since queued, and fresh: so is everything queued after it
                run.queued_at = run.seen_at  # seen since queued: to the back, as of then
                open_.move_to_end(run.key)
                continue
            open_.popitem(last=False)
            self._close(run)
            out.append(run)
        convs = self.conversations
        climit = now - self.conv_ttl_ns
        while convs:
            c = next(iter(convs.values()))
            if c.touched_ns >= climit:
                break
            convs.popitem(last=False)
            self.stats["conversations_evicted"]["ttl"] += 1
        return out

    def all_open(self) -> list[Run]:
        """Every open run (taken out, for the caller to finalise): flush and shutdown."""
        runs = list(self.open.values())
        runs.extend(r for r in self.by_trace.values() if r.traj is None)  # traces with nothing kept yet
        self.open.clear()
        for run in runs:
            self._close(run)
        self.by_trace.clear()
        return runs

    def discard(self, run: Run) -> None:
        """A run finalised at its root's end: out of the store; its trace remembered."""
        self.open.pop(run.key, None)
        self._close(run)

    def _close(self, run: Run) -> None:
        run.closed = True
        if self.by_trace.get(run.trace_id) is run:
            del self.by_trace[run.trace_id]
        self.remember_done(run.trace_id)

    def remember_done(self, trace_id: int) -> None:
        done = self.done_traces
        done[trace_id] = None
        if len(done) > self.late_memory:
            done.popitem(last=False)

    def conversation(self, cid: str, now: int, span_ns: int) -> Conversation:
        """The conversation ``cid`` (bounded key), fresh if it expired even without a sweep since."""
        convs = self.conversations
        conv = convs.get(cid)
        if conv is not None and conv.touched_ns < now - self.conv_ttl_ns:
            del convs[cid]
            self.stats["conversations_evicted"]["ttl"] += 1
            conv = None
        if conv is None:
            conv = Conversation(id=cid, last_seen_ns=span_ns, touched_ns=now)
            convs[cid] = conv
            if len(convs) > self.max_conversations:
                convs.popitem(last=False)
                self.stats["conversations_evicted"]["capacity"] += 1
        else:
            convs.move_to_end(cid)
            conv.touched_ns = now
        return conv

    def clear(self) -> None:
        """Forget everything (a forked child starts with no runs of its parent)."""
        self.open.clear()
        self.by_trace.clear()
        self.done_traces.clear()
        self.conversations.clear()
        self.next_sweep = 0
        self.victims = []
        self.lock = threading.Lock()  # the parent's may have been held at the fork
