"""Span values as labels (issue 10, defects 1 and 2): made safe where they enter the metrics, agent
names capped like tool names, and ``/metrics`` answering whatever is in the registry."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterable
from typing import Any

import pytest
from conftest import SERVICE, WRITES_ONLY, Harness
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from otel_agenteval import Policy, PolicyError
from otel_agenteval.metrics.exposition import serve, wsgi_app
from otel_agenteval.metrics.prometheus import Metrics
from otel_agenteval.reading.labels import safe_label

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
BAD_AGENT = "support\udc80\x1b[31m"  # a lone surrogate and an ANSI escape: the SDK accepts both
BAD_TOOL = "create_claim\ud800"


def _scrape(url: str, accept: str | None = None) -> str:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
        return resp.read().decode("utf-8")  # strict: the body is valid UTF-8


def _labels(registry: CollectorRegistry, label: str) -> set[str]:
    return {s.labels[label] for m in registry.collect() for s in m.samples if label in s.labels}


def _hostile_run(h: Harness) -> None:
    root = h.agent(BAD_AGENT)
    h.tool(root, BAD_TOOL, {"order_id": "1"}, at=1)
    h.tool(root, BAD_TOOL, {"order_id": "1"}, at=2)  # the same write twice
    h.tool(root, "create_claim", {"order_id": "2"}, at=3)
    h.tool(root, "create_claim", {"order_id": "2"}, at=4)  # a duplicate_write under the bad agent name
    h.end(root, 5)


def test_lone_surrogate_in_agent_and_tool_names_scrapes_in_both_formats(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    _hostile_run(h)
    text = generate_latest(h.registry).decode("utf-8")  # the registry itself, not only our endpoints
    om = generate_openmetrics(h.registry).decode("utf-8")
    assert "duplicate_write" in h.rules()
    agent = safe_label(BAD_AGENT)
    assert "\x1b" not in agent and agent.isprintable() and agent.startswith("support")
    assert _labels(h.registry, "agent_name") == {agent}
    assert safe_label(BAD_TOOL) in _labels(h.registry, "tool")
    for parsed in (text_string_to_metric_families(text), openmetrics_families(om)):
        names = {m.name for m in parsed}
        assert {"agenteval_trajectories", "agenteval_tool_calls", "agenteval_violations"} <= names
    assert h.value("agenteval_trajectories_total", service_name=SERVICE, agent_name=agent, outcome="unknown") == 1.0
    assert h.registry.get_sample_value("agenteval_violations_total", {
        "service_name": SERVICE, "agent_name": agent, "rule": "duplicate_write", "tool": "create_claim",
        "severity": "critical"}) == 1.0
    assert h.processor.stats()["errors"] == dict.fromkeys(h.processor.stats()["errors"], 0)


def test_endpoints_serve_the_hostile_run(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    _hostile_run(h)
    server = serve(0, registry=h.registry)
    try:
        for accept in (None, OPENMETRICS):
            body = _scrape(server.url, accept)
            assert f'agent_name="{safe_label(BAD_AGENT)}"' in body
    finally:
        server.close()


class _Hostile(Collector):
    """A collector of someone else's in the same registry: a surrogate in a label, then one that raises."""

    def __init__(self, raises: bool) -> None:
        self.raises = raises

    def collect(self) -> Iterable[Metric]:
        if self.raises:
            raise RuntimeError("broken collector")
        g = GaugeMetricFamily("app_queue", "Doc with a lone surrogate \udc80.", labels=("queue",))
        g.add_metric(("jobs\udc80",), 3)
        yield g


def test_endpoints_survive_whatever_is_in_the_registry(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    h.run("support", [("create_claim", {"order_id": "1"})])
    h.registry.register(_Hostile(raises=False))
    Counter("app_jobs", "Label set with a surrogate.", ("kind",), registry=h.registry).labels("x\udcff").inc()
    with pytest.raises(UnicodeEncodeError):
        generate_latest(h.registry)  # what prometheus_client alone does with this registry
    h.registry.register(_Hostile(raises=True))
    server = serve(0, registry=h.registry)
    try:
        for accept in (None, OPENMETRICS):
            body = _scrape(server.url, accept)
            assert 'app_queue{queue="jobs\ufffd"} 3.0' in body
            assert 'app_jobs_total{kind="x\ufffd"} 1.0' in body
            assert 'agent_name="support"' in body
        assert re.search(r"^agenteval_scrape_errors_total 2\.0$", body, re.MULTILINE)  # one per scrape
        filtered = _scrape(server.url + "?name[]=app_jobs_total")
        assert 'app_jobs_total{kind="x\ufffd"} 1.0' in filtered and "agenteval_trajectories" not in filtered
    finally:
        server.close()
    # the WSGI app does the same
    seen: list[str] = []
    body = b"".join(wsgi_app(h.registry)({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""},
                                         lambda status, headers: seen.append(status)))
    assert seen == ["200 OK"] and "app_queue" in body.decode("utf-8")


def test_ten_thousand_agent_names_give_a_bounded_scrape(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    for i in range(10_000):
        h.run(f"agent-{i}", [("lookup", {"i": i})], at=i * 0.01, step=0.001)
    agents = _labels(h.registry, "agent_name")
    assert len(agents) == 64 + 1 and "other" in agents  # limits.max_agent_labels defaults to 64
    body = generate_latest(h.registry)
    assert len(body) < 2_000_000, len(body)  # 10k names unbounded: ~100 MB
    assert h.value("agenteval_trajectories_total", service_name=SERVICE, agent_name="other",
                   outcome="unknown") == 10_000 - 64
    assert h.value("agenteval_label_overflow_total", label="agent_name") == 10_000 - 64
    other_calls = sum(s.value for m in h.registry.collect() if m.name == "agenteval_tool_calls" for s in m.samples
                      if s.labels.get("agent_name") == "other")
    assert other_calls == 10_000 - 64
    m = h.processor.metrics
    assert len(m._agents) <= 65 and len(m._rows) <= 4 * 65
    for _ in range(3):  # each update of a folded agent is counted, not only its first
        h.run("agent-9999", [("lookup", {})])
    assert h.value("agenteval_label_overflow_total", label="agent_name") == 10_000 - 64 + 3


def test_huge_agent_name_gives_a_small_scrape(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    huge = "a" * 100_000
    h.run(huge, [("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})])
    body = generate_latest(h.registry)
    assert len(body) < 100_000, len(body)  # was 11.5 MB
    assert _labels(h.registry, "agent_name") == {safe_label(huge)}
    assert len(safe_label(huge)) == 64


def test_policy_agents_keep_their_name_past_the_cap() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry, (), 64, known_agents=("vip", "*"), max_agent_labels=2)
    assert [m.agent_label("svc", a) for a in ("a", "b", "c", "vip", "d")] == [
        ("svc", "a"), ("svc", "b"), ("svc", "other"), ("svc", "vip"), ("svc", "other")]
    assert m.agent_label.overflow == 2
    # services are capped too, so (service, other) cannot grow without bound either
    assert m.agent_label("svc2", "a") == ("svc2", "other")
    assert m.agent_label("svc3", "a") == ("other", "other")


def test_max_agent_labels_is_a_limit() -> None:
    assert Policy().limits.max_agent_labels == 64
    assert Policy.from_yaml("limits: {max_agent_labels: 3}", "<t>").limits.max_agent_labels == 3
    with pytest.raises(PolicyError, match="limits.max_agent_labels"):
        Policy.from_yaml("limits: {max_agent_labels: 0}", "<t>")


def test_policy_cap_reaches_the_processor(make_processor: Any) -> None:
    h = make_processor("agents: {vip: {}}\nlimits: {max_agent_labels: 2}")
    for name in ("a", "b", "c", "vip"):
        h.run(name, [("lookup", {})])
    assert _labels(h.registry, "agent_name") == {"a", "b", "other", "vip"}
