"""Counting: every metric declared once (``catalogue``), the Prometheus series built from it
(``prometheus``, ``series``, ``collectors``), ``/metrics`` (``exposition``), the same metrics through
an OTel MeterProvider (``otel``), violations as OTel log records (``evaluation_events``), blind spots,
and the ``monitor``: the engine wired to its metrics, which every front door builds.

Stage 6 of 6: imports every stage below it.
"""
