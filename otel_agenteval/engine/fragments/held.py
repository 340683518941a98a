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
(``buffer_full``), and a later group whose window reaches back over those pieces is too; a door
with a bound of its own sheds the same way (:meth:`HeldFragments.shed`: ``serve``'s memory
budget, ``memory``; its write-ahead log near its bound). A held piece is counted nowhere until it
is played (its span counted then), and a door may ask which traces' pieces are held
(:meth:`HeldFragments.holds`: ``serve`` keeps them in its write-ahead log until played).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any, Final

from ...reading.extract import LLM, TOOL
from ...reading.unread import MAX_SCOPES, OTHER_SCOPE, is_workflow_root, scope_of
from .naming import stitched_trace
from .stitch import BUFFER_FULL, Group, Piece, clusters, decide
from .stitched import StitchedSpan, play

MAX_PIECES: Final = 10_000  # pieces held, all scopes together
MAX_OPEN_ROOTS: Final = 1024  # open roots remembered per watched scope (the oldest forgotten)
MAX_KEYS: Final = 1024  # scopes remembered as watched or as flushed


class _Held:
    """One piece held: the span, its window (:class:`Piece`), whether it is a tool call, and the
    bytes its door counts it at (``serve``'s memory budget; 0 in process)."""

    __slots__ = ("nbytes", "piece", "span", "tool")

    def __init__(self, span: Any, tool: bool, nbytes: int) -> None:
        self.span = span
        self.tool = tool
        self.nbytes = nbytes
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
        self.spans = engine._spans  # a piece's span is counted when it is played, not when held
        self.size = 0
        self.bytes = 0  # what the held pieces are counted at by their door
        self.weight = 0  # ... set by the door before it plays a trace: what each of its spans is counted at
        self.tids: dict[int, int] = {}  # trace id (as it came) -> its pieces held
        self.due: list[list[StitchedSpan]] = []  # decided, to play
        self.pieces: dict[tuple[str, str], list[_Held]] = {}  # by scope, in the order they came
        self.last: dict[tuple[str, str], int] = {}  # engine clock of each scope's last piece
        self.open: dict[tuple[str, str], dict[int, int]] = {}  # on_quiet: open roots, span id -> start
        self.watched: set[tuple[str, str]] = set()
        self.flushed: OrderedDict[tuple[str, str], int] = OrderedDict()  # the last end played for buffer_full

    def clear(self) -> None:
        """In a forked child: none of the parent's pieces or open roots."""
        self.pieces, self.last, self.open, self.due, self.size, self.bytes = {}, {}, {}, [], 0, 0
        self.watched, self.tids = set(), {}

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
        if due is not None:  # counted when played
            self._uncount(kind)
        if self.due:
            self.play_due()
        return due is not None

    def holds(self, tid: int) -> bool:
        """Whether a piece that came in trace ``tid`` is held (not yet played)."""
        return tid in self.tids

    def shed(self, reason: str, tids: Collection[int] | None = None) -> bool:
        """A door's bound: the scope holding the oldest piece (or every scope holding a piece of
        ``tids``) played as it came, counted with ``reason``; False when nothing is held."""
        with self.store.lock:
            keys = list(self.pieces)[:1] if tids is None else [
                k for k, held in self.pieces.items() if any(h.span._context[0] in tids for h in held)]
            for key in keys:
                self.due += self._play(key, self.pieces.pop(key), reason)
        self.play_due()
        return bool(keys)

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
        h = _Held(span, tool, self.weight)
        held.append(h)
        self.last[key] = now
        self.size += 1
        self.bytes += h.nbytes
        tid = span._context[0]
        self.tids[tid] = self.tids.get(tid, 0) + 1
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
                by_id = {h.piece.span_id: h for h in held}
                for cluster in clusters([h.piece for h in held]):
                    out += self._decided(k, [by_id[p.span_id] for p in cluster], decide(cluster))
        return out

    # --- what a decision plays ---------------------------------------------------------------------
    def _decided(self, key: tuple[str, str], held: list[_Held], group: Group) -> list[list[StitchedSpan]]:
        self._release(held)
        reason = group.reason
        if reason is None and group.outermost.start_ns <= self.flushed.get(key, -1):
            reason = BUFFER_FULL  # its window reaches back over pieces already played as they came
        if reason is None and self._of_a_run(held):
            first = held[0].span
            tid = first._context[0]
            self._count("fragments_stitched", first, len(held))
            return [stitched_trace(held, group.parents, tid)]  # a class-named tool step named where one can tell
        return self._as_they_came(key, held, reason)

    def _play(self, key: tuple[str, str], held: list[_Held], reason: str) -> list[list[StitchedSpan]]:
        self._release(held)
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

    def _release(self, held: list[_Held]) -> None:
        """Pieces no longer held (decided, to play)."""
        self.size -= len(held)
        tids = self.tids
        for h in held:
            self.bytes -= h.nbytes
            tid = h.span._context[0]
            n = tids.pop(tid, 1) - 1
            if n:
                tids[tid] = n

    def _uncount(self, kind: str | None) -> None:
        spans = self.spans
        if kind is TOOL:
            spans.tool -= 1
        elif kind is LLM:
            spans.llm -= 1
        else:
            spans.other -= 1

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
