"""The judge's own threads behind a bounded queue: a sampled run waits here, never the span path.

``put`` never waits in the live doors (a full queue drops the run and says so: the sink counts
it); offline (``replay --judge``) it waits instead, so every sampled run is judged. ``threads`` is
the judge's concurrency limit: that many requests in flight at most.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from ..engine.threadstate import enter, leave


class JudgeQueue:
    def __init__(self, work: Callable[[Any], None], size: int, threads: int, *, wait: bool = False,
                 on_dropped: Callable[[str], None] = lambda reason: None) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(size)
        self._size = size
        self._work = work
        self._wait = wait
        self._dropped = on_dropped
        self.stopping = threading.Event()  # set: workers stop taking jobs (and backoffs stop waiting)
        self._threads: list[threading.Thread] = []
        self._start(threads)

    def _start(self, threads: int) -> None:
        self._threads = [threading.Thread(target=self._run, name=f"agenteval-judge-{i}", daemon=True)
                         for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def after_fork(self) -> None:
        """In a forked child: the parent's threads are gone and its queue's lock may be held; a fresh
        queue (the parent judges its own runs) and fresh threads."""
        self._queue = queue.Queue(self._size)
        if not self.stopping.is_set():
            self._start(len(self._threads))

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def put(self, job: Any) -> bool:
        """Queue ``job``; False (dropped, counted as ``queue_full``) when the queue is full and this is live."""
        if self.stopping.is_set():
            self._dropped("shutdown")
            return False
        try:
            self._queue.put(job, block=self._wait)
        except queue.Full:
            self._dropped("queue_full")
            return False
        return True

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                job = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            enter()  # a span the judge's HTTP client makes is the monitor's, not an agent's
            try:
                self._work(job)
            except BaseException:  # noqa: BLE001 (the work counts its own errors; nothing kills the thread)
                pass
            finally:
                leave()
                self._queue.task_done()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued job is done (True), or ``timeout`` seconds (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Give queued jobs up to ``timeout`` seconds in all, then stop; what is left is dropped, counted
        (a request in flight is left to its daemon thread and its own timeout)."""
        deadline = time.monotonic() + timeout
        self.drain(timeout)
        self.stopping.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
            self._dropped("shutdown")
            self._queue.task_done()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
