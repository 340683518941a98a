"""Spans of a live receiver (``otel-agenteval serve``) -> the engine, each trace once it is complete.

Spans of one trace come from several services, in any order, in several batches, and no clock
says when the last one has come. So a trace is held until its root (a span with no parent) has
been held for ``grace_s`` (late children of other services still join it), or until ``idle_s``
pass with no new span (no root: the runs left open finish as ``incomplete``). A played trace is
one tree: a remote parent that is in the trace is made local, so the tool spans of another
service join the agent's run; start and end calls keep parents before children even across
skewed clocks. Past ``max_spans`` held spans the oldest trace is played at once (``capacity``), and
past ``max_bytes`` held bytes too (``memory``; a batch's bytes are given to :meth:`LiveFeeder.hold`;
the pieces of runs the engine holds, a trace each, count there too: the side holding more is shed);
spans of a played trace are ``late``, and a span sent twice (a retry) is played once
(``duplicates``), also when the retry comes after its trace was played (the span ids of the
last :data:`RECENT_SPANS` played spans are kept: a client that retries after a replica's
crash). Between plays the engine holds nothing open. :mod:`otel_agenteval.receiver.pipeline`
calls it from one thread at a time: no locks here.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

from ..engine.engine import Engine
from .feed import remember
from .spanview import RecordedSpan
from .tree import play_tree

UNBOUNDED = 1 << 60  # a budget of spans with no bound (a machine int when compiled)
RECENT_SPANS = 1 << 16  # span ids of the traces played last, kept to tell a retry from a late span
# engine.finalise_all reasons for what a play leaves open (the engine counts them as evictions)
_LEFT_OPEN = {"root_end": "ttl", "idle_timeout": "ttl", "capacity": "capacity", "memory": "capacity",
              "shutdown": "shutdown"}


class _Held:
    """One trace's spans waiting to be played (clock-driven mode)."""

    __slots__ = ("due", "nbytes", "played", "queued", "rooted", "seen", "spans", "tid")

    def __init__(self, tid: int, now: float) -> None:
        self.tid = tid
        self.spans: list[RecordedSpan] = []
        self.nbytes = 0  # what its spans are counted at (memory budget)
        self.seen = now  # last span held
        self.queued = now  # its place in the idle queue, as of then
        self.rooted = False
        self.due = 0.0  # rooted: when to play it
        self.played = False  # its entries left in the queues are skipped when they come up


class LiveFeeder:
    __slots__ = ("_bytes", "_clock", "_due", "_engine", "_grace", "_idle", "_idle_s", "_linger_ns", "_max", "_max_bytes",
                 "_played", "_recent", "_recent_spans", "_size", "_traces", "completed", "duplicates", "played_ids",
                 "stats")

    def __init__(self, engine: Engine, max_spans: int = 50_000, *, clock: Callable[[], float] = time.monotonic,
                 grace_s: float = 5.0, idle_s: float = 60.0, max_bytes: int = UNBOUNDED,
                 fragment_linger_s: float = 10.0) -> None:
        self._engine = engine
        # pieces of runs, a trace each (engine/fragments/): grouped once their scope sent none for this long
        self._linger_ns = int(fragment_linger_s * 1e9)
        self._max = max_spans
        self._max_bytes = max_bytes
        self._size = 0
        self._bytes = 0
        self._played: OrderedDict[int, None] = OrderedDict()  # trace ids played (late spans are counted)
        self._recent: OrderedDict[int, frozenset[int]] = OrderedDict()  # the last traces played: their span ids
        self._recent_spans = 0
        self.stats = {"held_max": 0, "late": 0}
        self._clock = clock
        self._grace = grace_s
        self._idle_s = idle_s
        self._traces: dict[int, _Held] = {}  # trace id -> its spans, while held
        # two queues, oldest first: every held trace by when it was last queued (idle timeout,
        # capacity), and rooted traces by when they are due (one grace for all, so in order). A
        # played trace's entries stay until they come up or the queue is compacted; a dict used
        # as a queue would scan the keys its pops left behind on every look at its head
        self._idle: deque[_Held] = deque()
        self._due: deque[_Held] = deque()
        self.completed = {"root_end": 0, "idle_timeout": 0, "capacity": 0, "memory": 0, "shutdown": 0}
        self.duplicates = 0
        self.played_ids: list[int] | None = None  # given a list (serve --wal-dir): each played trace id

    @property
    def held_spans(self) -> int:
        return self._size

    @property
    def held_bytes(self) -> int:
        return self._bytes

    @property
    def held_traces(self) -> int:
        return len(self._traces)

    def holds(self, tid: int) -> bool:
        """Whether spans of trace ``tid`` are held (not yet played), here or as pieces of a run in
        the engine (engine/fragments/)."""
        return tid in self._traces or self._engine.fragments.holds(tid)

    def mark_played(self, tids: Iterable[int]) -> None:
        """Take these traces as played (recovered from a log): their spans from now on are late."""
        for tid in tids:
            remember(self._played, tid)

    def hold(self, spans: list[RecordedSpan], nbytes: int = 0) -> None:
        """Hold spans (any order, any batch) until their trace is due; see :meth:`tick`. ``nbytes``:
        what the batch is counted at in the memory budget (shared evenly by its spans)."""
        now = self._clock()
        traces, played = self._traces, self._played
        size = self._size
        each = nbytes // len(spans) if spans else 0
        for span in spans:
            tid = span._context[0]
            h = traces.get(tid)
            if h is None:
                if tid in played:  # counted, not replayed
                    if span._context[1] in self._recent.get(tid, ()):
                        self.duplicates += 1  # a retry of a span already played
                    else:
                        self.stats["late"] += 1
                    continue
                h = _Held(tid, now)
                traces[tid] = h
                self._idle.append(h)
            else:
                h.seen = now
            h.spans.append(span)
            h.nbytes += each
            self._bytes += each
            size += 1
            if span._parent is None and not h.rooted:
                h.rooted = True
                h.due = now + self._grace
                self._due.append(h)
        self._size = size
        while self._size > self._max and traces:
            self._finish(self._oldest(), "capacity")
        pieces = self._engine.fragments
        while self._bytes + pieces.bytes > self._max_bytes and (traces or pieces.size):
            if not (pieces.bytes >= self._bytes and pieces.shed("memory")):
                self._finish(self._oldest(), "memory")
        if self._size > self.stats["held_max"]:
            self.stats["held_max"] = self._size

    def tick(self, budget: int = UNBOUNDED) -> int:
        """Play the traces that are due now, oldest first, until ``budget`` spans have been
        played (the rest wait for the next tick); returns how many traces were played."""
        now = self._clock()
        played = 0
        left = self._size - budget  # held spans once the budget is spent
        due = self._due
        while due and self._size > left:
            h = due[0]
            if not h.played and h.due > now:
                break
            due.popleft()
            if not h.played:
                self._finish(h, "root_end")
                played += 1
        idle = self._idle
        limit = now - self._idle_s
        while idle and self._size > left:
            h = idle[0]
            if h.played:
                idle.popleft()
                continue
            if h.seen > limit:
                if h.seen == h.queued:
                    break  # fresh and not seen since queued: so is everything queued after it
                h.queued = h.seen  # seen since queued: to the back, as of then (second chance)
                idle.rotate(-1)
                continue
            idle.popleft()
            self._finish(h, "idle_timeout")
            played += 1
        if len(idle) > 2 * len(self._traces) + 1024:  # mostly played entries: drop them (amortised O(1))
            self._idle = deque(h for h in idle if not h.played)
        self._engine.fragments.settle_now(self._linger_ns)
        return played

    def close_held(self) -> None:
        """Play everything held (shutdown), then finalise whatever is open as ``incomplete``."""
        for queue in (self._due, self._idle):  # rooted first: played as they are
            for h in list(queue):
                if not h.played:
                    self._finish(h, "shutdown")
            queue.clear()
        self._engine.fragments.settle_now()
        self._engine.finalise_all("shutdown")

    def _remember_spans(self, tid: int, spans: list[RecordedSpan]) -> None:
        recent = self._recent
        ids = recent[tid] = frozenset(s._context[1] for s in spans)
        self._recent_spans += len(ids)
        while self._recent_spans > RECENT_SPANS:
            self._recent_spans -= len(recent.popitem(last=False)[1])

    def _oldest(self) -> _Held:
        idle = self._idle
        while idle[0].played:
            idle.popleft()
        return idle[0]

    def _finish(self, h: _Held, reason: str) -> None:
        del self._traces[h.tid]
        h.played = True
        spans, h.spans = h.spans, []  # an entry left in a queue holds no spans
        self._size -= len(spans)
        self._bytes -= h.nbytes
        self.completed[reason] += 1
        remember(self._played, h.tid)
        self._remember_spans(h.tid, spans)
        if self.played_ids is not None:
            self.played_ids.append(h.tid)
        pieces = self._engine.fragments
        pieces.weight = h.nbytes // len(spans) if spans else 0  # what a piece held in this play is counted at
        self.duplicates += play_tree(self._engine, spans)
        pieces.weight = 0
        if self._engine.open_trajectories:  # no root came for them: incomplete
            self._engine.finalise_all(_LEFT_OPEN[reason])
