"""A ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``, one of the app's own) raised by a
user callback or rule never escapes ``span.end()`` nor stops ``serve``'s feeding: it is counted,
and the other callbacks still run."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from prometheus_client import CollectorRegistry
from serve_support import scrape, settled, value, wait_until
from test_serve_input import _spans

from otel_agenteval.model.trajectory import ToolStep
from otel_agenteval.receiver import Receiver, ServeConfig
from otel_agenteval.rules import builtin_rules

WRITES = "tools: {create_claim: {write: true}}\n"


class AppStop(BaseException):
    pass


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt(), AppStop()])
def test_a_base_exception_from_a_callback_or_rule_never_escapes_span_end(make_processor: Any, exc) -> None:
    after: list[str] = []

    def raises(_: Any) -> None:
        raise exc

    def rule(event: Any, check: Any) -> None:
        if isinstance(event, ToolStep):
            raise exc

    h = make_processor(WRITES, rules=[*builtin_rules().values(), rule], on_violation=[raises, lambda v: after.append(v.rule)],
                       on_trajectory=[raises, lambda t: after.append("run")])
    root = h.agent("support", 0.0)
    h.tool(root, "create_claim", {"id": 1}, at=1.0)
    h.tool(root, "create_claim", {"id": 1}, at=2.0)  # a duplicate write: a violation, so on_violation runs
    h.end(root, 3.0)  # span.end() returned: nothing escaped
    assert after == ["duplicate_write", "run"]  # the callbacks after the raising ones still ran
    assert h.value("agenteval_processor_errors_total", stage="callback") == 2.0
    assert h.value("agenteval_processor_errors_total", stage="rule") == 2.0


def test_serve_keeps_feeding_after_a_callback_raises_system_exit() -> None:
    seen: list[str] = []

    def raises(_: Any) -> None:
        raise SystemExit(1)

    cfg = ServeConfig(grpc_port=-1, http_port=0, metrics_port=0, grace_s=0.1, log_violations=False)
    r = Receiver(cfg, None, registry=CollectorRegistry(), on_trajectory=(raises, lambda t: seen.append(t.outcome)))
    r.start()
    try:
        exporter = HttpExporter(endpoint=f"http://127.0.0.1:{r.ports.http}/v1/traces")
        for i in range(3):
            assert exporter.export(_spans()).name == "SUCCESS"
            wait_until(settled(r.ports.metrics, i + 1), what="the run played")
        exporter.shutdown()
        assert len(seen) == 3
        s = scrape(r.ports.metrics)
        assert value(s, "agenteval_processor_errors_total", stage="callback") == 3
        assert value(s, "agenteval_receiver_errors_total", stage="feed") == 0
    finally:
        r.stop()
