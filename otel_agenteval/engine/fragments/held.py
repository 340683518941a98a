"""Pieces of runs held until their group is complete, then given back as traces to play.

A piece (a tool call, model call or workflow alone at the root of its trace, with no agent run
around it) is held by (service, instrumentation scope). When its group is complete is the
front door's to say, as only it knows what it sees:

- in process (``on_quiet``), the engine sees every root start: a scope is *watched* once a root
  starts while one of its workflow roots is open (normal instrumentations under concurrency
  too, at the cost of a dict entry a root); its pieces are held, and a cluster of them is
  settled once every root of the scope still open started after the cluster's last end;
- ``replay`` settles at the end of its input, ``serve`` once a scope sent no piece for its
  linger (:meth:`HeldFragments.settle_idle`).

Past ``max_pieces`` held, the scope holding the oldest piece is played as it came
(``buffer_full``), and a later group whose window reaches back over those pieces is too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final

from ...reading.extract import LLM, TOOL
from ...reading.spanfields import PublicSpanFields, SpanIds
from ...reading.spans import register_span_type
from ...reading.unread import MAX_SCOPES, OTHER_SCOPE, is_workflow_root, scope_of
from .stitch import BUFFER_FULL, Group, Piece, clusters, decide

MAX_PIECES: Final = 10_000  # pieces held, all scopes together
MAX_OPEN_ROOTS: Final = 1024  # open roots remembered per watched scope (the oldest forgotten)
MAX_KEYS: Final = 1024  # scopes remembered as watched or as flushed


class StitchedSpan(PublicSpanFields):
    """A held piece given back to the engine: the span's fields, in the trace and under the parent
    its group gave it (its own trace and no parent when left as it came); never held again."""

    __slots__ = ("_attributes", "_context", "_end_time", "_events", "_instrumentation_scope", "_name", "_parent",
                 "_resource", "_start_time", "_status", "kind")

    def __init__(self, span: Any, trace_id: int, parent_id: int | None) -> None:
        self._context = SpanIds((trace_id, span._context[1], False))
        self._parent = None if parent_id is None else SpanIds((trace_id, parent_id, False))
        self._name = span._name
        self._start_time = span._start_time
        self._end_time = span._end_time
        self._status = span._status
        self._attributes = span._attributes
        self._events = span._events
        self._resource = span._resource
        self._instrumentation_scope = getattr(span, "instrumentation_scope", None)
        self.kind = getattr(span, "kind", None)

    instrumentation_scope = property(attrgetter("_instrumentation_scope"))


register_span_type(StitchedSpan)


class _Held:
    """One piece held: the span, its window (:class:`Piece`), whether it is a tool call."""

    __slots__ = ("piece", "span", "tool")

    def __init__(self, span: Any, tool: bool) -> None:
        self.span = span
        self.tool = tool
        self.piece = Piece(span._context[1], span._start_time or 0, span._end_time or 0, span._name or "")


def key_of(service: str, span: Any) -> tuple[str, str]:
    scope = getattr(span, "instrumentation_scope", None)
    return service, (getattr(scope, "name", None) or "")


class HeldFragments:
    """The held pieces and, in process, the open roots of watched scopes: changed under the
    engine's store lock; what is decided is played outside it through ``start`` and ``end``."""

    def __init__(self, engine: Any, on_quiet: bool, max_pieces: int = MAX_PIECES) -> None:
        """``engine``: whose counters, store lock (a fresh one after a fork), clock, ``start`` and
        ``end`` it uses; ``on_quiet``: in process (else the door says when, :meth:`settle_now`)."""
        self.stats: dict[str, Any] = engine._stats
        self.store = engine._store
        self.clock = engine._clock  # ``now(0)``: ns
        self.start: Callable[[Any], None] = engine.start
        self.end: Callable[[Any], None] = engine.end
        self.on_quiet = on_quiet
        self.max_pieces = max_pieces
        self.size = 0
        self.due: list[list[StitchedSpan]] = []  # decided, to play
        self.pieces: dict[tuple[str, str], list[_Held]] = {}  # by scope, in the order they came
        self.last: dict[tuple[str, str], int] = {}  # engine clock of each scope's last piece
        self.open: dict[tuple[str, str], dict[int, int]] = {}  # on_quiet: open roots, span id -> start
        self.watched: set[tuple[str, str]] = set()
        self.flushed: OrderedDict[tuple[str, str], int] = OrderedDict()  # the last end played for buffer_full

    def clear(self) -> None:
        """In a forked child: none of the parent's pieces or open roots."""
        self.pieces, self.last, self.open, self.due, self.size = {}, {}, {}, [], 0
        self.watched = set()

    # --- in process: roots starting and ending ----------------------------------------------------
    def root_started(self, span: Any, service: str, attrs: dict[str, Any]) -> None:
        """A local root started: remembered while open if its scope is watched or it is a workflow;
        a root starting while a workflow root of its scope is open makes the scope watched."""
        if type(span) is StitchedSpan or not self.on_quiet:
            return
        workflow = bool(attrs) and is_workflow_root(attrs)
        if not workflow and not self.open:
            return  # the usual case: no workflow root seen in this process
        key = key_of(service, span)
        with self.store.lock:
            roots = self.open.get(key)
            if key not in self.watched:
                if roots and len(self.watched) < MAX_KEYS:
                    self.watched.add(key)  # a root inside an open workflow root of its scope
                elif not workflow:
                    return
            if roots is None:
                if len(self.open) >= MAX_KEYS:
                    return
                roots = self.open[key] = {}
            roots[span._context[1]] = span._start_time or 0
            if len(roots) > MAX_OPEN_ROOTS:
                roots.pop(next(iter(roots)))

    def root_ended(self, span: Any, kind: str | None, attrs: dict[str, Any], run: Any, now: int) -> bool:
        """A local root ended (``run``: its run): True when it is held as a piece of a run. A piece:
        nothing of an agent run under it, and a tool call, a model call or a workflow."""
        if type(span) is StitchedSpan or (self.on_quiet and not self.open):
            return False
        piece = run.traj is None and not run.is_agent and (
            kind is TOOL or kind is LLM or (kind is None and bool(attrs) and is_workflow_root(attrs)))
        if not piece and not self.open:
            return False
        key = key_of(run.service, span)
        with self.store.lock:
            roots = self.open.get(key)
            ended = roots is not None and roots.pop(span._context[1], None) is not None
            due = self.hold(key, span, kind is TOOL, now) if piece else None
            if self.on_quiet and (ended or due is not None):
                self.due += self.settle_quiet(key)
            if due:
                self.due += due
        if self.due:
            self.play_due()
        return due is not None

    def settle_now(self, idle_ns: int | None = None) -> None:
        """The door says: play every piece held (None), or those of scopes idle for ``idle_ns``."""
        if self.size:
            with self.store.lock:
                self.due += self.settle() if idle_ns is None else self.settle_idle(self.clock.now(0), idle_ns)
            self.play_due()

    def flush(self) -> None:
        """In process, at a flush or shutdown: every piece held played (a door that says when does so itself)."""
        if self.on_quiet:
            self.settle_now()

    def play_due(self) -> None:
        """Play what was decided (outside the lock), each trace in time order."""
        while self.due:
            with self.store.lock:
                todo, self.due = self.due, []
            for trace in todo:
                play(trace, self.start, self.end)

    # --- pieces ------------------------------------------------------------------------------------
    def hold(self, key: tuple[str, str], span: Any, tool: bool, now: int) -> list[list[StitchedSpan]] | None:
        """Hold a piece (None: not held, play it now); past the bound, what to play instead."""
        if self.on_quiet and key not in self.watched:
            return None
        held = self.pieces.get(key)
        if held is None:
            held = self.pieces[key] = []
        held.append(_Held(span, tool))
        self.last[key] = now
        self.size += 1
        if self.size <= self.max_pieces:
            return []
        oldest = next(iter(self.pieces))
        return self._play(oldest, self.pieces.pop(oldest), BUFFER_FULL)

    def settle_quiet(self, key: tuple[str, str]) -> list[list[StitchedSpan]]:
        """In process: the clusters of ``key`` that no open root of its scope can reach."""
        held = self.pieces.get(key)
        if not held:
            return []
        roots = self.open.get(key)
        first_open = min(roots.values()) if roots else None
        if first_open is None:
            return self.settle(key)
        out: list[list[StitchedSpan]] = []
        by_id = {h.piece.span_id: h for h in held}
        for cluster in clusters([h.piece for h in held]):
            if max(p.end_ns for p in cluster) < first_open:
                self.size -= len(cluster)
                out += self._decided(key, [by_id.pop(p.span_id) for p in cluster], decide(cluster))
        if not by_id:
            del self.pieces[key]
            self.last.pop(key, None)
        elif len(by_id) < len(held):
            self.pieces[key] = [h for h in held if h.piece.span_id in by_id]
        return out

    def settle_idle(self, now: int, idle_ns: int) -> list[list[StitchedSpan]]:
        """The scopes that sent no piece for ``idle_ns`` of the engine clock (``serve``'s linger)."""
        out: list[list[StitchedSpan]] = []
        for key in [k for k, t in self.last.items() if now - t >= idle_ns]:
            out += self.settle(key)
        return out

    def settle(self, key: tuple[str, str] | None = None) -> list[list[StitchedSpan]]:
        """Every piece of ``key`` (None: of every scope) decided now."""
        out: list[list[StitchedSpan]] = []
        for k in list(self.pieces) if key is None else [key]:
            held = self.pieces.pop(k, None)
            self.last.pop(k, None)
            if held:
                self.size -= len(held)
                by_id = {h.piece.span_id: h for h in held}
                for cluster in clusters([h.piece for h in held]):
                    out += self._decided(k, [by_id[p.span_id] for p in cluster], decide(cluster))
        return out

    # --- what a decision plays ---------------------------------------------------------------------
    def _decided(self, key: tuple[str, str], held: list[_Held], group: Group) -> list[list[StitchedSpan]]:
        reason = group.reason
        if reason is None and group.outermost.start_ns <= self.flushed.get(key, -1):
            reason = BUFFER_FULL  # its window reaches back over pieces already played as they came
        if reason is None and self._of_a_run(held):
            first = held[0].span
            tid = first._context[0]
            self._count("fragments_stitched", first, len(held))
            return [[StitchedSpan(h.span, tid, group.parents.get(h.piece.span_id)) for h in held]]
        return self._as_they_came(key, held, reason)

    def _play(self, key: tuple[str, str], held: list[_Held], reason: str) -> list[list[StitchedSpan]]:
        self.size -= len(held)
        self.last.pop(key, None)
        self.flushed[key] = max(self.flushed.get(key, 0), *(h.piece.end_ns for h in held))
        self.flushed.move_to_end(key)
        if len(self.flushed) > MAX_KEYS:
            self.flushed.popitem(last=False)
        return self._as_they_came(key, held, reason)

    def _as_they_came(self, key: tuple[str, str], held: list[_Held], reason: str | None) -> list[list[StitchedSpan]]:
        # in process only watched scopes' pieces are held: every one the bound plays is counted
        if reason is not None and (self._of_a_run(held) or (reason == BUFFER_FULL and self.on_quiet)):
            self._count("fragments_unstitched", held[0].span, len(held), reason)
        return [[StitchedSpan(h.span, h.span._context[0], None)] for h in held]

    def _of_a_run(self, held: list[_Held]) -> bool:
        """Pieces of an agent run, not a gateway's model calls: a tool call among them, or a scope
        already known to send its pieces apart."""
        return any(h.tool for h in held) or self._fragmenting(held[0].span)

    def _fragmenting(self, span: Any) -> bool:
        return scope_of(span) in self.stats["fragmented"]

    def _count(self, name: str, span: Any, n: int, reason: str | None = None) -> None:
        counts: dict[Any, int] = self.stats[name]
        scope = scope_of(span)
        key: Any = scope if reason is None else (scope, reason)
        if key not in counts and len(counts) >= MAX_SCOPES:
            key = OTHER_SCOPE if reason is None else (OTHER_SCOPE, reason)
        counts[key] = counts.get(key, 0) + n


def play(trace: list[StitchedSpan], start: Callable[[Any], None], end: Callable[[Any], None]) -> None:
    """A trace's starts and ends in time order (``trace``: parents before children): a parent starts
    before its children at one time, and a child that ends just after its parent ends first."""
    if len(trace) == 1:
        start(trace[0])
        end(trace[0])
        return
    depth: dict[int, int] = {}
    until: dict[int, int] = {}  # a span's end, no later than its parent's
    timeline = []
    for i, s in enumerate(trace):
        sid, p = s._context[1], s._parent
        depth[sid] = 0 if p is None else depth[p[1]] + 1
        until[sid] = s._end_time if p is None else max(min(s._end_time, until[p[1]]), s._start_time)
        timeline += [(s._start_time, 0, depth[sid], i), (until[sid], 1, -depth[sid], i)]
    for _, is_end, _, i in sorted(timeline):
        (end if is_end else start)(trace[i])
