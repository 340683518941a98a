"""What reading recorded traces counts and raises, shared by every reader (JSON, protobuf)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class InputError(Exception):
    """A file that cannot be read at all (missing, unreadable, unknown format)."""


class RejectedInput(InputError):
    """A bad line, record or span, raised instead of skipped when reading ``strict``."""


@dataclass
class ReadCounts:
    """What was read: nothing is dropped without being counted here."""

    files: int = 0
    lines: int = 0  # text lines, or protobuf records
    records: int = 0  # JSON documents / OTLP requests / to_json objects parsed
    spans: int = 0  # spans yielded
    rejected: int = 0  # bad lines, records or spans skipped

    def as_dict(self) -> dict[str, int]:
        return {"files": self.files, "lines": self.lines, "records": self.records, "spans": self.spans,
                "rejected": self.rejected}


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC held off while one record is parsed and read: a record is thousands of
    objects that die before this ends, so the GC would only walk them (a third of the reading
    time with the default thresholds). Reference counting frees them as before; the GC's state
    is restored after, even when ``reject`` raises."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
