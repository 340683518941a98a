"""Counters and histograms kept as plain numbers and turned into metric families at scrape time.

prometheus_client's ``labels()`` / ``observe(exemplar=…)`` cost tens of Python calls each; a
finished trajectory updates eight series, so the processor keeps them here (a dict lookup and a
few additions under one lock) and builds the families only when Prometheus asks.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, Exemplar, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

Key = tuple[str, ...]


class PlainCounter:
    def __init__(self, name: str, doc: str, labels: Sequence[str]) -> None:
        self.name, self.doc, self.labels = name, doc, tuple(labels)
        self.values: dict[Key, float] = {}

    def touch(self, key: Key) -> None:
        self.values.setdefault(key, 0.0)

    def inc(self, key: Key, amount: float = 1.0) -> None:
        self.values[key] = self.values.get(key, 0.0) + amount

    def family(self) -> Metric:
        fam = CounterMetricFamily(self.name, self.doc, labels=self.labels)
        for key, value in sorted(self.values.items()):
            fam.add_metric(key, value)
        return fam


class PlainHistogram:
    """Bucket counts, sum, and the latest exemplar (a trace id) per bucket, per label set."""

    def __init__(self, name: str, doc: str, labels: Sequence[str], bounds: Sequence[float]) -> None:
        self.name, self.doc, self.labels = name, doc, tuple(labels)
        self.bounds = tuple(float(b) for b in bounds)
        self._le = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        self.values: dict[Key, list[Any]] = {}  # key -> [counts..., sum, exemplars]

    def series(self, key: Key) -> list[Any]:
        """The series of ``key``: ``[bucket counts, sum, exemplars]``, bound once by writers that use :func:`record`."""
        s = self.values.get(key)
        if s is None:
            n = len(self.bounds) + 1
            s = self.values[key] = [[0] * n, 0.0, [None] * n]
        return s

    def touch(self, key: Key) -> None:
        self.series(key)

    def observe(self, key: Key, value: float, trace_id: str | None = None) -> None:
        record(self.series(key), self.bounds, value, trace_id, time.time())

    def family(self) -> Metric:
        fam = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
        for key, (counts, total, exemplars) in sorted(self.values.items()):
            buckets: list[Any] = []
            running = 0
            for le, n, ex in zip(self._le, counts, exemplars):
                running += n
                if ex is None:
                    buckets.append((le, running))
                else:
                    buckets.append((le, running, Exemplar({"trace_id": ex[0]}, ex[1], ex[2])))
            fam.add_metric(list(key), buckets, total)
        return fam


def record(series: list[Any], bounds: Sequence[float], value: float, trace_id: str | None, now: float) -> None:
    """One observation into a histogram series (see :meth:`PlainHistogram.series`)."""
    i = bisect_left(bounds, value)  # first bucket whose upper bound is >= value
    series[0][i] += 1
    series[1] += value
    if trace_id is not None:
        series[2][i] = (trace_id, value, now)
