"""Connection limits for the HTTP listeners (OTLP/HTTP and /metrics): a bound on open connections,
an idle timeout, and a deadline on a request's headers.

uvicorn closes a keep-alive connection only after a response, and never one that connected and
sent nothing, nor one that sends its headers a byte a second: 1,100 such connections used up the
descriptor limit (1024) and the replica answered no one. Here, on each listener:

- a connection with no request in progress (just connected, or between requests) is closed after
  ``idle_s`` (``--http-idle-timeout``);
- a request's headers must arrive within ``read_s`` of its first byte (``--http-read-timeout``);
  its body is bounded by ``--body-timeout`` in the app;
- past ``max_connections`` (``--max-connections``) a new connection closes the one idle the
  longest to make room (as nginx does with keep-alive connections), so a flood of idle
  connections never locks out /healthz or an honest client; connections that never sent a
  request go first, a kept-alive one (an exporter's, a Prometheus') only when none is left, so a
  flood of new idle connections does not cut honest clients off between two requests; when every
  connection is busy with a request, the new one gets a 503 and is closed.

Each close is counted in ``agenteval_receiver_connections_closed_total{listener, reason}``.

The bookkeeping is O(1) a connection: a listener keeps its open connections in two dicts (never
used, kept alive), each in the order they last became idle, so the one to evict is at a front.
(It scanned every open connection twice on each new one: under a flood of reconnecting idlers
that was ~20% of the process' CPU, and the accept backlog, /healthz's probes with it, queued
behind it.)
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n"
           b"retry-after: 1\r\ncontent-length: 26\r\n\r\ntoo many open connections\n")


@dataclass
class Limits:
    max_connections: int
    idle_s: float
    read_s: float
    closed: Any  # Counter child factory: closed(reason) -> Counter
    # the listener's open connections (not closed by it), the one idle the longest first: those
    # that never sent a request (``fresh``), those kept alive after one (``kept``)
    fresh: dict[Any, None] = field(default_factory=dict)
    kept: dict[Any, None] = field(default_factory=dict)

    @property
    def open(self) -> int:
        return len(self.fresh) + len(self.kept)


def limits_for(listener: str, counter: Counter, max_connections: int, idle_s: float, read_s: float) -> Limits:
    children = {reason: counter.labels(listener, reason) for reason in ("idle", "read_timeout", "evicted", "refused")}
    return Limits(max_connections, idle_s, read_s, children.__getitem__)  # labels() once, not per close


def guarded(base: type, limits: Limits) -> type:
    """A subclass of uvicorn's protocol class ``base`` (httptools or h11) enforcing ``limits``."""

    class Guarded(base):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            self._idle_since = time.monotonic()
            self._header_timer: asyncio.TimerHandle | None = None
            self._cycle_at_start: Any = None
            if limits.open >= limits.max_connections and not (_evict_one(limits.fresh) or _evict_one(limits.kept)):
                limits.closed("refused").inc()
                transport.write(REFUSED)
                transport.close()
            else:
                limits.fresh[self] = None
            super().connection_made(transport)
            if not transport.is_closing():  # idle until a request begins: the keep-alive timer
                self.timeout_keep_alive_task = self.loop.call_later(limits.idle_s, self._idle_timeout)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.is_closing():
                return
            if self.cycle is not self._cycle_at_start and self._header_timer is not None:
                self._header_timer.cancel()  # the headers came in full: the app bounds the body
                self._header_timer = None
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                # bytes of a request whose headers are not complete yet
                self._cycle_at_start = self.cycle
                self._header_timer = self.loop.call_later(limits.read_s, self._read_timeout)

        def on_response_complete(self) -> None:
            self._idle_since = time.monotonic()
            if limits.fresh.pop(self, False) is None or limits.kept.pop(self, False) is None:
                limits.kept[self] = None  # idle again: to the back of the kept-alive ones
            super().on_response_complete()
            if self.timeout_keep_alive_task is not None:  # uvicorn's own handler does not count
                self.timeout_keep_alive_task.cancel()
                self.timeout_keep_alive_task = self.loop.call_later(limits.idle_s, self._idle_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            limits.fresh.pop(self, None)
            limits.kept.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

        @property
        def idle(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _idle_timeout(self) -> None:
            if not self.transport.is_closing():
                limits.closed("idle").inc()
                self._close()

        def _read_timeout(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                limits.closed("read_timeout").inc()
                self._close()

        def evict(self) -> None:
            limits.closed("evicted").inc()
            self._unset_keepalive_if_required()
            self._close()

        def _close(self) -> None:
            limits.fresh.pop(self, None)
            limits.kept.pop(self, None)
            self.transport.close()

    return Guarded


def _evict_one(open_: dict[Any, None]) -> bool:
    """Close the connection of ``open_`` idle the longest (no request in progress); False when all
    are busy. ``open_`` is in the order connections last became idle: busy ones (few: one a
    request in flight) are passed over, closed ones dropped."""
    closed = []
    victim = None
    for c in open_:
        if c.transport.is_closing():  # closed by uvicorn, not yet lost
            closed.append(c)
        elif c.idle:
            victim = c
            break
    for c in closed:
        del open_[c]
    if victim is None:
        return False
    victim.evict()
    return True
