"""The write-ahead log under ``serve --wal-dir``: numbered segments of CRC-checked records.

Modelled on Prometheus' WAL: a directory of segment files named by an 8-digit number
(``00000001``, ...), appended to in order; a new one is started past ``segment_bytes``. A record
is a header (type: 1 byte, payload length: 4 bytes, CRC-32 of the payload: 4 bytes, little
endian) and its payload. Appends are written at once and synced in groups, like the Collector's
persistent queue with a sync interval: :meth:`Log.append` returns a future that the sync thread
resolves (``OK``) once an ``fsync`` covering the record has returned, at most one ``fsync`` per
``sync_s``. The log is bounded in bytes (``max_bytes``) and refuses an append past it (``FULL``),
as it does when the disk refuses a write (``DISK``: the partial record is cut off again).

Reading (:meth:`Log.read`, at start-up) stops at the first torn, corrupt or zero-filled record
(short header, length past the end, CRC mismatch, type 0): that segment is cut there and later
segments are removed; the bytes cut are counted, never fatal. A disk that refuses a write is
said once (a log line, :attr:`Log.refusing_since`) until a write is taken again. Which segments may go is the caller's business
(:mod:`.durability`): :meth:`Log.drop_oldest` removes finished ones, oldest first.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from .config import ConfigError

HEADER = struct.Struct("<BII")  # type, payload length, CRC-32 of the payload
OK, FULL, DISK = "ok", "full", "disk"
SEGMENT_NAME = "{:08d}"
log = logging.getLogger("otel_agenteval.serve")
LOCK_NAME = "LOCK"


@dataclass
class Segment:
    index: int
    path: Path
    size: int = 0
    tids: set[int] = field(default_factory=set)  # trace ids with spans in it (the caller's)


@dataclass
class Record:
    type: int  # 1 and up (the caller's); 0 is never written
    payload: bytes
    segment: Segment


@dataclass
class Cut:
    """What reading cut: the torn or corrupt tail of one segment and every segment after it."""
    segment: str
    offset: int
    reason: str
    bytes: int = 0


def done(result: str) -> Future[str]:
    f: Future[str] = Future()
    f.set_result(result)
    return f


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Log:
    """One directory's log; one process at a time (an exclusive lock on ``LOCK``)."""

    def __init__(self, directory: str | Path, *, sync_s: float = 0.02, max_bytes: int = 1 << 30,
                 segment_bytes: int = 16 << 20) -> None:
        self.dir = Path(directory)
        self.sync_s = sync_s
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []  # oldest first; the last one is appended to
        self.bytes = 0
        self.cuts: list[Cut] = []
        self.refusing_since, self.refusal = 0.0, ""  # since when the disk refuses writes (0: it takes them), why
        self.stats = {"syncs": 0, "sync_errors": 0, "dropped_segments": 0, "refused_full": 0, "refused_disk": 0}
        self._fd = -1
        self._lock = threading.Lock()  # appends, rotation, the group
        self._group: list[Future[str]] = []  # appended since the last sync began
        self._retired: list[int] = []  # descriptors of rotated segments: synced, then closed
        self._wake = threading.Event()
        self._closing = False
        self._syncer = threading.Thread(target=self._sync_loop, name="agenteval-wal-sync", daemon=True)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lockfd = os.open(self.dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"invalid --wal-dir: {self.dir}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._lockfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lockfd)
            raise ConfigError(f"invalid --wal-dir: {self.dir} is in use by another serve process") from None

    # --- reading (start-up) ---------------------------------------------------------------------
    def read(self) -> Iterator[Record]:
        """Every intact record, oldest first; a torn or corrupt tail is cut (:attr:`cuts`)."""
        names = sorted(p.name for p in self.dir.iterdir() if p.name.isdigit() and len(p.name) == 8)
        for i, name in enumerate(names):
            seg = Segment(int(name), self.dir / name)
            data = seg.path.read_bytes()
            offset, why = 0, ""
            while offset < len(data):
                if len(data) - offset < HEADER.size:
                    why = "torn header"
                    break
                kind, length, crc = HEADER.unpack_from(data, offset)
                if kind == 0:  # types start at 1: zeros a file system left after a crash, not records
                    why = "zero-filled"
                    break
                start = offset + HEADER.size
                if start + length > len(data):
                    why = "torn record"
                    break
                payload = data[start:start + length]
                if zlib.crc32(payload) != crc:
                    why = "CRC mismatch"
                    break
                yield Record(kind, payload, seg)
                offset = start + length
            seg.size = offset
            self.segments.append(seg)
            self.bytes += offset
            if why:
                self._cut(seg, len(data), why, [self.dir / n for n in names[i + 1:]])
                return

    def _cut(self, seg: Segment, size: int, why: str, later: list[Path]) -> None:
        cut = Cut(seg.path.name, seg.size, why, size - seg.size)
        with open(seg.path, "r+b") as f:
            f.truncate(seg.size)
            os.fsync(f.fileno())
        for path in later:
            cut.bytes += path.stat().st_size
            path.unlink()
        self.cuts.append(cut)

    # --- appending ------------------------------------------------------------------------------
    def start(self) -> Log:
        """Open a new segment after what :meth:`read` found, and start the sync thread."""
        self._new_segment()
        self._syncer.start()
        return self

    def _new_segment(self) -> None:
        index = self.segments[-1].index + 1 if self.segments else 1
        seg = Segment(index, self.dir / SEGMENT_NAME.format(index))
        fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        try:
            _fsync_dir(self.dir)
        except OSError:
            os.close(fd)
            seg.path.unlink(missing_ok=True)
            raise
        self._fd = fd
        self.segments.append(seg)

    def append(self, kind: int, payload: bytes, tids: set[int] | frozenset[int] = frozenset(),
               bounded: bool = True) -> Future[str]:
        """Write one record now; the future is ``OK`` once it is synced (``FULL`` past
        ``max_bytes`` unless not ``bounded``, ``DISK`` when the disk refused the write or the sync)."""
        record = HEADER.pack(kind, len(payload), zlib.crc32(payload)) + payload
        with self._lock:
            if self._closing:
                return done(DISK)
            if bounded and self.bytes + len(record) > self.max_bytes:
                self.stats["refused_full"] += 1
                return done(FULL)
            seg = self.segments[-1]
            try:
                written = os.write(self._fd, record)
                if written != len(record):
                    raise OSError(28, "short write")
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, seg.size)  # no partial record left behind
                self.stats["refused_disk"] += 1
                self._refused(exc)
                return done(DISK)
            if self.refusing_since:
                self._accepting()
            seg.size += len(record)
            self.bytes += len(record)
            seg.tids.update(tids)
            future: Future[str] = Future()
            self._group.append(future)
            if seg.size >= self.segment_bytes:
                self._rotate()
        self._wake.set()
        return future

    def rotate(self) -> None:
        """Start a new segment now, so the one appended to can be dropped once its traces are
        played (a full disk frees nothing otherwise: the segment being written is never dropped)."""
        with self._lock:
            if not self._closing and self.segments[-1].size:
                self._rotate()
        self._wake.set()

    def _rotate(self) -> None:
        with contextlib.suppress(OSError):  # no room for a new file: this one goes on (tried again later)
            old = self._fd
            self._new_segment()
            self._retired.append(old)

    def _refused(self, exc: OSError) -> None:
        if self.refusing_since:  # said once
            return
        self.refusing_since, self.refusal = time.monotonic(), exc.strerror or str(exc)
        log.error("agenteval serve: the write-ahead log's disk refused a write (%s): requests are refused (429) "
                  "until played segments are dropped or space is freed; /readyz is not ready meanwhile", self.refusal)

    def _accepting(self) -> None:
        log.warning("agenteval serve: the write-ahead log takes writes again, %.1fs after its disk refused one (%s)",
                    time.monotonic() - self.refusing_since, self.refusal)
        self.refusing_since, self.refusal = 0.0, ""

    def _sync_loop(self) -> None:
        last = 0.0
        while True:
            self._wake.wait()
            wait = last + self.sync_s - time.monotonic()
            if wait > 0 and not self._closing:
                time.sleep(wait)  # the group: whatever is appended meanwhile joins this sync
            with self._lock:
                self._wake.clear()
                group, self._group = self._group, []
                retired, self._retired = self._retired, []
                fd, closing = self._fd, self._closing
            ok = True
            for d in [*retired, fd]:
                try:
                    os.fsync(d)
                except OSError:
                    ok = False
            for d in retired:
                os.close(d)
            last = time.monotonic()
            self.stats["syncs"] += 1
            if not ok:
                self.stats["sync_errors"] += 1
            for f in group:
                f.set_result(OK if ok else DISK)
            if closing:
                return

    # --- dropping -------------------------------------------------------------------------------
    def closed_segments(self) -> list[Segment]:
        """Segments no longer appended to, oldest first."""
        with self._lock:
            return self.segments[:-1]

    def drop_oldest(self, n: int) -> None:
        """Remove the ``n`` oldest segments (never the one appended to)."""
        with self._lock:
            n = min(n, len(self.segments) - 1)
            gone, self.segments = self.segments[:n], self.segments[n:]
            for seg in gone:
                self.bytes -= seg.size
        for seg in gone:
            with contextlib.suppress(FileNotFoundError):
                seg.path.unlink()
            self.stats["dropped_segments"] += 1

    def close(self, remove: bool = False) -> None:
        """Sync and stop; ``remove``: delete every segment (nothing in them is needed any more)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self._wake.set()
        if self._syncer.is_alive():
            self._syncer.join(10)
        if self._fd >= 0:
            os.close(self._fd)
        if remove:
            for seg in self.segments:
                with contextlib.suppress(FileNotFoundError):
                    seg.path.unlink()
            self.segments = []
            self.bytes = 0
        os.close(self._lockfd)
