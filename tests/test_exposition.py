"""``/metrics`` over HTTP and mounted in WSGI/ASGI apps: text by default, OpenMetrics with exemplars."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import Iterator
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from conftest import ISSUE_POLICY, SERVICE, Harness

from otel_agenteval.metrics.exposition import MetricsServer, asgi_app, serve, wsgi_app

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@pytest.fixture
def harness(make_processor: Any) -> Harness:
    """One finished trajectory: a failed claim, retried successfully (recovered), then the root ends."""
    h: Harness = make_processor(ISSUE_POLICY)
    root = h.agent("support")
    h.tool(root, "lookup_order", {"order_id": "1"}, at=1)
    h.tool(root, "create_claim", {"order_id": "1"}, at=2, error="timeout")
    h.tool(root, "create_claim", {"order_id": "1", "note": "retry"}, at=3)
    h.end(root, 4)
    h.run("support", [("lookup_order", {"order_id": "2"})], at=10)  # no tool error
    return h


@pytest.fixture
def server(harness: Harness) -> Iterator[MetricsServer]:
    s = serve(0, registry=harness.registry)
    yield s
    s.close()


def _get(url: str, accept: str | None = None) -> tuple[str, str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def _steps_exemplars(body: str) -> list[str]:
    return re.findall(r'^agenteval_trajectory_steps_bucket\{.*\} \S+ # \{trace_id="([0-9a-f]{32})"\}', body, re.MULTILINE)


def test_serves_on_loopback_by_default_on_a_chosen_port(server: MetricsServer) -> None:
    assert server.addr == "127.0.0.1"
    assert server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}/metrics"
    server_, thread = server  # the old tuple shape still unpacks
    assert thread.daemon and server_ is server.server


def test_classic_text_format_without_exemplars(server: MetricsServer, harness: Harness) -> None:
    ctype, body = _get(server.url)
    assert ctype.startswith("text/plain; version=0.0.4")
    assert f'agenteval_trajectory_steps_count{{agent_name="support",service_name="{SERVICE}"}} 2.0' in body
    assert "# {" not in body and "# EOF" not in body


def test_openmetrics_carries_trace_id_exemplars(server: MetricsServer, harness: Harness) -> None:
    ctype, body = _get(server.url, OPENMETRICS)
    assert ctype.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")
    traces = {t.trace_hex for t in harness.trajectories}
    assert set(_steps_exemplars(body)) == traces


def test_trajectories_with_tool_errors_counts_recovered_runs(harness: Harness) -> None:
    by_outcome = {o: harness.agent_value("agenteval_trajectories_with_tool_errors_total", "support", outcome=o)
                  for o in ("success", "failure", "unknown", "incomplete")}
    assert by_outcome == {"success": 1.0, "failure": 0.0, "unknown": 0.0, "incomplete": 0.0}
    assert harness.agent_value("agenteval_trajectories_total", "support", outcome="success") == 1.0


def test_port_in_use_is_an_oserror(server: MetricsServer) -> None:
    with pytest.raises(OSError):
        serve(server.port, registry=None)


def test_bad_port_is_rejected_with_the_setting_named() -> None:
    with pytest.raises(ValueError, match="metrics port: 70000"):
        serve(70000)


def test_wsgi_app_negotiates_openmetrics(harness: Harness) -> None:
    app = wsgi_app(harness.registry)
    environ: dict[str, Any] = {"PATH_INFO": "/metrics", "HTTP_ACCEPT": OPENMETRICS}
    setup_testing_defaults(environ)
    status: list[str] = []
    headers: list[list[tuple[str, str]]] = []
    body = b"".join(app(environ, lambda s, h: (status.append(s), headers.append(h))))
    assert status == ["200 OK"]
    assert dict(headers[0])["Content-Type"].startswith("application/openmetrics-text")
    assert set(_steps_exemplars(body.decode())) == {t.trace_hex for t in harness.trajectories}


def test_asgi_app_serves_text_by_default(harness: Harness) -> None:
    app = asgi_app(harness.registry)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/metrics", "query_string": b"", "headers": []}
    asyncio.run(app(scope, receive, send))
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:]).decode()
    assert start["status"] == 200
    assert dict(start["headers"])[b"Content-Type"].startswith(b"text/plain; version=0.0.4")
    assert 'agenteval_trajectories_total{agent_name="support",outcome="success"' in body
