"""One listener's series: its spans and its requests by result, under its protocol's label."""

from __future__ import annotations

from ..pipeline import ReceiverMetrics


class ListenerCounts:
    """``agenteval_receiver_spans_total`` children bound once for a listener, and its requests."""

    __slots__ = ("_protocol", "_requests", "accepted", "ok", "refused", "rejected")

    def __init__(self, metrics: ReceiverMetrics, protocol: str) -> None:
        self._protocol = protocol
        self._requests = metrics.requests
        self.accepted = metrics.spans.labels(protocol, "accepted")
        self.rejected = metrics.spans.labels(protocol, "rejected")
        self.refused = metrics.spans.labels(protocol, "refused")
        self.ok = metrics.requests.labels(protocol, "ok")  # every clean request: bound once

    def request(self, result: str) -> None:
        """One more request that ended with ``result`` (``too_large``, ``throttled``, ...)."""
        self._requests.labels(self._protocol, result).inc()
