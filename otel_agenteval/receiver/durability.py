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

Pieces of runs arriving a trace each are held by the engine after their trace is played, until
their group is complete (``--fragment-linger``, engine/fragments/): such a trace is marked played
only once its pieces are played, and holds its segments back meanwhile, as a held trace does. So
after a crash its spans are held again and the run is put back together as if it had not. The
hold is bounded (its pieces, the linger, the memory budget); and when the log is above
:data:`PRESSURE` of its bound with its oldest segment held back by pieces alone, those pieces are
played as they came (``agenteval_fragments_unstitched_total{reason="buffer_full"}``) rather than
have the log refuse requests.

Recovered spans are counted in the memory budget (``--memory-limit-mib``) at what their listener
counted them (:func:`.memory.span_bytes`); past the held share the oldest traces are played at
once (``memory``) and marked played like any other. A request refused before it is logged (the
budget: 429 / ``RESOURCE_EXHAUSTED``) is never in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import Metric

from ..engine.fragments.stitch import BUFFER_FULL
from ..metrics.catalogue import (
    WAL_BYTES,
    WAL_CAPACITY,
    WAL_CUT,
    WAL_RECOVERED,
    WAL_REFUSED,
    WAL_REFUSING,
    WAL_SEGMENTS,
    WAL_SYNCS,
    WAL_UNREADABLE,
)
from ..replay.spanview import RecordedSpan
from .compression import CONTENT_ENCODINGS, BadRequest, TooLarge, grpc_message
from .config import ServeConfig
from .decoding import from_json, from_protobuf
from .memory import span_bytes
from .pipeline import Batch
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
        self.refused = Counter(WAL_REFUSED.name, WAL_REFUSED.doc, WAL_REFUSED.labels, registry=registry)
        self.recovered = Counter(WAL_RECOVERED.name, WAL_RECOVERED.doc, registry=registry)
        self.cut = Counter(WAL_CUT.name, WAL_CUT.doc, registry=registry)
        self.unreadable = Counter(WAL_UNREADABLE.name, WAL_UNREADABLE.doc, registry=registry)
        self.syncs = Gauge(WAL_SYNCS.name, WAL_SYNCS.doc, registry=registry)
        self.bytes = Gauge(WAL_BYTES.name, WAL_BYTES.doc, registry=registry)
        self.capacity = Gauge(WAL_CAPACITY.name, WAL_CAPACITY.doc, registry=registry)
        self.segments = Gauge(WAL_SEGMENTS.name, WAL_SEGMENTS.doc, registry=registry)
        self.refusing = Gauge(WAL_REFUSING.name, WAL_REFUSING.doc, registry=registry)
        for reason in (FULL, DISK):
            self.refused.labels(reason)
        self.syncs.set_function(lambda: wal.stats["syncs"])
        self.bytes.set_function(lambda: wal.bytes)
        self.capacity.set(wal.max_bytes)
        self.segments.set_function(lambda: len(wal.segments))
        self.refusing.set_function(lambda: 1.0 if wal.refusing_since else 0.0)


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
        batches: list[Batch] = []
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
            record.segment.tids.update(s._context[0] for s in got.spans)
            batches.append(got)
        feeder = self.pipeline.feeder
        feeder.mark_played(played)
        recovered = 0
        for batch in batches:  # counted in the memory budget as a listener's batch is (past it: played early)
            again = [s for s in batch.spans if s._context[0] not in played]
            if again:
                feeder.hold(again, batch.nbytes * len(again) // len(batch.spans))
                recovered += len(again)
        self.metrics.recovered.inc(recovered)
        self.metrics.unreadable.inc(unreadable)
        cut = sum(c.bytes for c in self.log.cuts)
        self.metrics.cut.inc(cut)
        self.log.start()
        self.summary = {"event": "wal_recovered", "dir": str(self.log.dir), "segments": len(self.log.segments) - 1,
                        "records": records, "spans": recovered, "traces": feeder.held_traces,
                        "held_bytes": feeder.held_bytes, "played_early": feeder.completed["memory"],
                        "played_traces_skipped": len(played), "unreadable_records": unreadable, "cut_bytes": cut,
                        "cuts": [{"segment": c.segment, "offset": c.offset, "reason": c.reason, "bytes": c.bytes}
                                 for c in self.log.cuts],
                        "seconds": round(time.monotonic() - started, 3)}
        return self.summary

    def _decode(self, payload: bytes) -> Batch:
        """A logged request's spans, counted at what the listener counted them (:func:`.memory.span_bytes`)."""
        source, encoding, body = payload[0], payload[1], payload[2:]
        if source == GRPC:
            plain = grpc_message(body, self.max_body_bytes)
        else:
            inflater = CONTENT_ENCODINGS[ENCODING_NAMES[encoding]]
            plain = body if inflater is None else inflater(body, self.max_body_bytes)
        spans = (from_json(plain) if source == HTTP_JSON else from_protobuf(plain)).spans
        return Batch(spans, span_bytes(len(plain), len(spans)))

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
        pressed = ((self.log.bytes > PRESSURE * self.log.max_bytes or self.log.refusing_since)
                   and now - self._last_checkpoint > PRESSURE_EVERY_S)  # a full disk: segments dropped soon
        if pressed or now - self._last_checkpoint > CHECKPOINT_S:
            try:
                self.checkpoint()
            except Exception:  # never fail the feeder thread on the log's account
                log.exception("agenteval serve: error in a write-ahead log checkpoint")
                self.pipeline.counters.errors.labels("wal").inc()

    def checkpoint(self) -> None:
        """Mark the traces played since the last one (synced) but those whose pieces the engine
        still holds, then drop finished segments. While the disk refuses writes the segment being
        written is closed first, so it can go too."""
        self._last_checkpoint = time.monotonic()
        if self.log.refusing_since:
            self.log.rotate()
        closed = self.log.closed_segments()
        feeder = self.pipeline.feeder
        if closed and (self.log.bytes > PRESSURE * self.log.max_bytes or self.log.refusing_since):
            self._free(closed[0])
        played = self._played
        if played:
            held = [tid for tid in played if feeder.holds(tid)]  # pieces of runs: marked once played
            if len(held) == len(played) or self._mark([tid for tid in played if not feeder.holds(tid)]):
                played[:] = held  # not synced: all kept for the next checkpoint
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

    def _free(self, seg: Any) -> None:
        """The log near its bound: pieces of runs that alone hold back its oldest segment played as they came."""
        pieces = self.pipeline.engine.fragments
        holding = {tid for tid in seg.tids if self.pipeline.feeder.holds(tid)}
        if holding and all(pieces.holds(tid) for tid in holding):
            pieces.shed(BUFFER_FULL, holding)

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
