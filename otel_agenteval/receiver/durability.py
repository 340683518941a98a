"""``serve --wal-dir``: no acknowledged span lost when the process dies.

A listener logs each request body as received (still compressed: ~27x fewer bytes for gzip)
in the write-ahead log (:mod:`.wal`) and acknowledges it only once the log's group sync
covering it has returned. At start-up the log is read back: its requests are decoded by the
listeners' own decoders and held again, so the runs that were open when the process died are
rebuilt and played as if it had not.

A trace played into the engine is marked ``PLAYED`` in the log before its counts can be
scraped: at each ``/metrics`` scrape the engine is held still while the marks of the traces
played since are synced and the metrics read (:class:`DurableRegistry`). So after a crash a
trace whose counts Prometheus saw is not played again, and one it never saw is played once
more: counted once either way. Marks are also written every :data:`CHECKPOINT_S` (a replica
nobody scrapes still frees its log) and whenever the log is above :data:`PRESSURE` of its bound.
Then the oldest segments none of whose traces is still held are dropped; played traces that
still have spans in later segments (late spans) are marked again first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import Metric

from ..replay.spanview import RecordedSpan
from .compression import CONTENT_ENCODINGS, BadRequest, TooLarge, grpc_message
from .config import ServeConfig
from .decoding import from_json, from_protobuf
from .wal import DISK, FULL, OK, Log, done

if TYPE_CHECKING:
    from .pipeline import Pipeline

log = logging.getLogger("otel_agenteval.serve")

SPANS, PLAYED = 1, 2  # record types
GRPC, HTTP_PROTOBUF, HTTP_JSON = 0, 1, 2  # where a logged request came from: how to decode it
ENCODINGS = {b"": 0, b"identity": 0, b"gzip": 1, b"deflate": 2}
ENCODING_NAMES = (b"identity", b"gzip", b"deflate")
CHECKPOINT_S = 30.0  # marks written at least this often, scraped or not
PRESSURE = 0.8  # ... and whenever the log holds more than this share of --wal-max-bytes
PRESSURE_EVERY_S = 1.0
TID_BYTES = 16


class WalMetrics:
    """``agenteval_wal_*``, in the engine's registry."""

    def __init__(self, registry: CollectorRegistry, wal: Log) -> None:
        self.refused = Counter("agenteval_wal_refused_spans",
                               "Spans refused (429 / RESOURCE_EXHAUSTED) because the write-ahead log could not take "
                               "them: full (--wal-max-bytes) or the disk refused the write or sync.",
                               ("reason",), registry=registry)
        self.recovered = Counter("agenteval_wal_recovered_spans",
                                 "Spans read back from the write-ahead log at start-up and held again.",
                                 registry=registry)
        self.cut = Counter("agenteval_wal_cut_bytes",
                           "Bytes of a torn or corrupt log tail cut at start-up.", registry=registry)
        self.unreadable = Counter("agenteval_wal_unreadable_records",
                                  "Logged requests that could not be decoded again at start-up (skipped).",
                                  registry=registry)
        self.syncs = Gauge("agenteval_wal_syncs", "Group syncs (fsync) of the write-ahead log.", registry=registry)
        self.bytes = Gauge("agenteval_wal_bytes", "Bytes in the write-ahead log's segments.", registry=registry)
        self.capacity = Gauge("agenteval_wal_capacity_bytes", "The write-ahead log's bound (--wal-max-bytes).",
                              registry=registry)
        self.segments = Gauge("agenteval_wal_segments", "Segment files in the write-ahead log.", registry=registry)
        for reason in (FULL, DISK):
            self.refused.labels(reason)
        self.syncs.set_function(lambda: wal.stats["syncs"])
        self.bytes.set_function(lambda: wal.bytes)
        self.capacity.set(wal.max_bytes)
        self.segments.set_function(lambda: len(wal.segments))


class Durability:
    """The log as the pipeline uses it. :meth:`checkpoint` and :meth:`recover` need the engine
    still (the pipeline's turn, or before it starts)."""

    def __init__(self, pipeline: Pipeline, config: ServeConfig, registry: CollectorRegistry) -> None:
        assert config.wal_dir is not None
        self.pipeline = pipeline
        self.max_body_bytes = config.max_body_bytes
        self.max_spans = config.max_spans_per_request
        self.log = Log(config.wal_dir, sync_s=config.wal_sync_s, max_bytes=config.wal_max_bytes,
                       segment_bytes=config.wal_segment_bytes)
        self.metrics = WalMetrics(registry, self.log)
        self._played: list[int] = []
        pipeline.feeder.played_ids = self._played
        self._last_checkpoint = time.monotonic()
        self.summary: dict[str, Any] = {}

    # --- start-up -------------------------------------------------------------------------------
    def recover(self) -> dict[str, Any]:
        """Hold again what the log holds (but traces marked played); start appending."""
        started = time.monotonic()
        played: set[int] = set()
        spans: list[RecordedSpan] = []
        records = unreadable = 0
        for record in self.log.read():
            records += 1
            if record.type == PLAYED:
                played.update(_tids(record.payload))
                continue
            try:
                got = self._decode(record.payload)
            except (BadRequest, TooLarge, ValueError, IndexError) as exc:
                unreadable += 1
                log.warning("agenteval serve: a logged request in %s cannot be read again: %s",
                            record.segment.path.name, exc)
                continue
            record.segment.tids.update(s._context[0] for s in got)
            spans.extend(got)
        again = [s for s in spans if s._context[0] not in played]
        feeder = self.pipeline.feeder
        feeder.mark_played(played)
        feeder.hold(again)
        self.metrics.recovered.inc(len(again))
        self.metrics.unreadable.inc(unreadable)
        cut = sum(c.bytes for c in self.log.cuts)
        self.metrics.cut.inc(cut)
        self.log.start()
        self.summary = {"event": "wal_recovered", "dir": str(self.log.dir), "segments": len(self.log.segments) - 1,
                        "records": records, "spans": len(again), "traces": feeder.held_traces,
                        "played_traces_skipped": len(played), "unreadable_records": unreadable, "cut_bytes": cut,
                        "cuts": [{"segment": c.segment, "offset": c.offset, "reason": c.reason, "bytes": c.bytes}
                                 for c in self.log.cuts],
                        "seconds": round(time.monotonic() - started, 3)}
        return self.summary

    def _decode(self, payload: bytes) -> list[RecordedSpan]:
        source, encoding, body = payload[0], payload[1], payload[2:]
        if source == GRPC:
            return from_protobuf(grpc_message(body, self.max_body_bytes)).spans
        inflater = CONTENT_ENCODINGS[ENCODING_NAMES[encoding]]
        plain = body if inflater is None else inflater(body, self.max_body_bytes)
        return (from_json(plain) if source == HTTP_JSON else from_protobuf(plain)).spans

    # --- listeners ------------------------------------------------------------------------------
    def log_request(self, spans: list[RecordedSpan], source: int, encoding: bytes, body: bytes) -> Future[str] | None:
        """Log a request as received; the future is ``OK`` once synced, else why it was refused
        (None: too many spans, refused by the listener unlogged)."""
        if len(spans) > self.max_spans:
            return None
        queue = self.pipeline.queue
        if queue.spans + len(spans) > queue.capacity:
            return done(FULL)  # the queue would refuse it: not logged (the client retries)
        got = self.log.append(SPANS, bytes((source, ENCODINGS.get(encoding, 0))) + body,
                              {s._context[0] for s in spans})
        got.add_done_callback(lambda f: self._count(f, len(spans)))
        return got

    def _count(self, f: Future[str], n: int) -> None:
        result = f.result()
        if result != OK:
            self.metrics.refused.labels(result).inc(n)

    # --- with the engine still ------------------------------------------------------------------
    def tick(self) -> None:
        """The feeder thread's look at the clock: a checkpoint when one is due."""
        now = time.monotonic()
        pressed = self.log.bytes > PRESSURE * self.log.max_bytes and now - self._last_checkpoint > PRESSURE_EVERY_S
        if pressed or now - self._last_checkpoint > CHECKPOINT_S:
            try:
                self.checkpoint()
            except Exception:  # never fail the feeder thread on the log's account
                log.exception("agenteval serve: error in a write-ahead log checkpoint")
                self.pipeline.counters.errors.labels("wal").inc()

    def checkpoint(self) -> None:
        """Mark the traces played since the last one (synced), then drop finished segments."""
        self._last_checkpoint = time.monotonic()
        if self._played:
            if not self._mark(self._played):
                return  # not synced: kept for the next checkpoint, nothing dropped
            self._played.clear()
        closed = self.log.closed_segments()
        feeder = self.pipeline.feeder
        n = 0
        for seg in closed:
            if any(feeder.holds(tid) for tid in seg.tids):
                break
            n += 1
        if not n:
            return
        later: set[int] = set()
        for seg in self.log.segments[n:]:
            later |= seg.tids
        again = [tid for seg in closed[:n] for tid in seg.tids & later if not feeder.holds(tid)]
        if again and not self._mark(again):  # played, with spans in segments that stay: marked again
            return
        self.log.drop_oldest(n)

    def _mark(self, tids: Iterable[int]) -> bool:
        """Mark traces played, synced (past the bound: marks are small, and free the log)."""
        payload = b"".join(tid.to_bytes(TID_BYTES, "big") for tid in tids)
        return self.log.append(PLAYED, payload, bounded=False).result() == OK

    def close(self, finished: bool) -> None:
        """Stop the log; ``finished`` (every held trace was played at shutdown): remove it."""
        self.log.close(remove=finished)


def _tids(payload: bytes) -> Iterator[int]:
    for i in range(0, len(payload) - TID_BYTES + 1, TID_BYTES):
        yield int.from_bytes(payload[i:i + TID_BYTES], "big")


class DurableRegistry(CollectorRegistry):
    """``/metrics``' registry with ``--wal-dir``: the engine is held still while the traces
    played since the last scrape are marked in the log and the metrics are read."""

    def __init__(self, registry: CollectorRegistry, durability: Durability) -> None:
        super().__init__()
        self._registry = registry
        self._durability = durability

    def collect(self) -> Iterator[Metric]:
        pipeline = self._durability.pipeline
        with pipeline.still():
            self._durability.checkpoint()
            metrics = list(self._registry.collect())
        return iter(metrics)

    def restricted_registry(self, names: Iterable[str]) -> Any:  # /metrics?name[]=...
        with self._durability.pipeline.still():
            self._durability.checkpoint()
        return self._registry.restricted_registry(names)
