"""Counters and histograms kept as plain numbers and turned into metric families at scrape time.

prometheus_client's ``labels()`` / ``observe(exemplar=…)`` cost tens of Python calls each; a
finished trajectory updates eight series, so the processor keeps them here (a dict lookup and a
few additions under one lock) and builds the families only when Prometheus asks.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, Exemplar, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString as _untyped_go_float

_go_float: Callable[[float], str] = _untyped_go_float  # untyped upstream: typed once here

Key = tuple[str, ...]


class Cell:
    """One counter series' value, bound once by writers that count often."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0


class PlainCounter:
    def __init__(self, name: str, doc: str, labels: Sequence[str]) -> None:
        self.name, self.doc, self.labels = name, doc, tuple(labels)
        self.values: dict[Key, Cell] = {}

    def cell(self, key: Key) -> Cell:
        c = self.values.get(key)
        if c is None:
            c = self.values[key] = Cell()
        return c

    def touch(self, key: Key) -> None:
        self.cell(key)

    def inc(self, key: Key, amount: float = 1.0) -> None:
        self.cell(key).value += amount

    def family(self) -> Metric:
        fam = CounterMetricFamily(self.name, self.doc, labels=self.labels)
        for key, c in sorted(self.values.items(), key=_first):
            fam.add_metric(key, c.value)
        return fam


def _first(item: tuple[Key, Any]) -> Key:
    return item[0]


class Series:
    """One histogram series: bucket counts, sum, and the latest exemplar per bucket."""

    __slots__ = ("counts", "exemplars", "total")

    def __init__(self, buckets: int) -> None:
        self.counts: list[int] = [0] * buckets
        self.total = 0.0
        self.exemplars: list[tuple[str, float, float] | None] = [None] * buckets


class PlainHistogram:
    """Bucket counts, sum, and the latest exemplar (a trace id) per bucket, per label set."""

    def __init__(self, name: str, doc: str, labels: Sequence[str], bounds: Sequence[float]) -> None:
        self.name, self.doc, self.labels = name, doc, tuple(labels)
        self.bounds = tuple(float(b) for b in bounds)
        self._le = [_go_float(b) for b in self.bounds] + ["+Inf"]
        self.values: dict[Key, Series] = {}

    def series(self, key: Key) -> Series:
        """The series of ``key``, bound once by writers that use :func:`record`."""
        s = self.values.get(key)
        if s is None:
            s = self.values[key] = Series(len(self.bounds) + 1)
        return s

    def touch(self, key: Key) -> None:
        self.series(key)

    def observe(self, key: Key, value: float, trace_id: str | None = None) -> None:
        record(self.series(key), self.bounds, value, trace_id, time.time())

    def family(self) -> Metric:
        fam = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
        for key, s in sorted(self.values.items(), key=_first):
            buckets: list[Any] = []
            running = 0
            for le, n, ex in zip(self._le, s.counts, s.exemplars):
                running += n
                if ex is None:
                    buckets.append((le, running))
                else:
                    buckets.append((le, running, Exemplar({"trace_id": ex[0]}, ex[1], ex[2])))
            fam.add_metric(list(key), buckets, s.total)
        return fam


def record(series: Series, bounds: tuple[float, ...], value: float, trace_id: str | None, now: float) -> None:
    """One observation into a histogram series (see :meth:`PlainHistogram.series`)."""
    i = bisect_left(bounds, value)  # the first bucket whose upper bound is >= value
    series.counts[i] += 1
    series.total += value
    if trace_id is not None:
        series.exemplars[i] = (trace_id, value, now)
