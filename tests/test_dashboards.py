"""The committed Grafana dashboard: regenerated identically, wired to real metric names.

Whether each query returns data from a real Prometheus is tested in
``test_prometheus_integration.py``; here: structure, variables, exemplars, and that every
metric a query names is one the processor exports.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from conftest import ISSUE_POLICY, Harness
from opentelemetry import trace

ROOT = Path(__file__).resolve().parent.parent
OVERVIEW = ROOT / "dashboards" / "agenteval-overview.json"
if str(ROOT) not in sys.path:  # `dashboards` is a folder of the repository, not of the package
    sys.path.insert(0, str(ROOT))


def _dashboard() -> dict[str, Any]:
    return json.loads(OVERVIEW.read_text())


def _panels(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])  # collapsed rows hold their panels


def _targets(d: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for p in _panels(d):
        for t in p.get("targets", []):
            yield p, t


@pytest.mark.skipif(sys.version_info < (3, 11), reason="grafana-foundation-sdk needs Python >= 3.11")
def test_regenerating_gives_the_committed_json(tmp_path: Path) -> None:
    from dashboards.generate import DASHBOARDS, main, render

    assert main(["--out", str(tmp_path)]) == 0
    for name, make in DASHBOARDS.items():
        assert (tmp_path / name).read_text() == (ROOT / "dashboards" / name).read_text(), \
            f"{name} is out of date: run `make dashboards`"
        assert render(make()) == render(make())  # deterministic
    assert main(["--check"]) == 0


@pytest.mark.skipif(sys.version_info < (3, 11), reason="grafana-foundation-sdk needs Python >= 3.11")
def test_check_mode_notices_a_stale_file(tmp_path: Path) -> None:
    from dashboards.generate import main

    assert main(["--out", str(tmp_path)]) == 0
    stale = tmp_path / "agenteval-overview.json"
    stale.write_text(stale.read_text().replace("Success rate", "Sucess rate"))
    assert main(["--check", "--out", str(tmp_path)]) == 1


def test_stable_uid_variables_and_schema() -> None:
    d = _dashboard()
    assert d["uid"] == "agenteval-overview"
    assert d["schemaVersion"] >= 39
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert set(variables) == {"datasource", "service_name", "agent_name"}
    for name in ("service_name", "agent_name"):
        v = variables[name]
        assert v["type"] == "query" and v["includeAll"] and v["multi"] and v["allValue"] == ".*"
        assert f", {name})" in v["query"]


def test_panels_cover_the_overview() -> None:
    titles = [p["title"] for p in _panels(_dashboard())]
    wanted = ["Trajectories/s by outcome", "Success rate", "Cost per successful task", "Tool calls per trajectory",
              "Tool calls per trajectory: p50 / p95 / p99", "LLM calls", "Tokens/s",
              "Violations/s by rule and agent", "Violations in range by rule and agent", "Top tools by calls",
              "Top tools by errors", "Tool-error recovery", "Redundant calls/s", "Processor errors/s",
              "Evictions, late spans and dropped steps", "Scrape target up", "Monitor health",
              "Share of runs calling each tool", "Looping runs/s", "Runs in pieces: spans/s by scope"]
    assert [t for t in wanted if t not in titles] == []
    kinds = {p["title"]: p["type"] for p in _panels(_dashboard())}
    assert kinds["Tool calls per trajectory"] == "heatmap"
    assert kinds["Violations in range by rule and agent"] == "table"


def test_ids_ref_ids_and_layout_are_sound() -> None:
    d = _dashboard()
    panels = list(_panels(d))
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        refs = [t["refId"] for t in p.get("targets", [])]
        assert all(refs) and len(set(refs)) == len(refs), p["title"]
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
    for a, b in combinations(panels, 2):
        ga, gb = a["gridPos"], b["gridPos"]
        overlap = (ga["x"] < gb["x"] + gb["w"] and gb["x"] < ga["x"] + ga["w"]
                   and ga["y"] < gb["y"] + gb["h"] and gb["y"] < ga["y"] + ga["h"])
        assert not overlap, (a["title"], b["title"])


def test_steps_panels_ask_for_exemplars() -> None:
    exemplar_exprs = [t["expr"] for p, t in _targets(_dashboard()) if t.get("exemplar")]
    assert any("histogram_quantile(0.99" in e and "agenteval_trajectory_steps_bucket" in e for e in exemplar_exprs)
    assert any(e.startswith("sum by (le) (increase(agenteval_trajectory_steps_bucket") for e in exemplar_exprs)


def test_agent_queries_honour_both_variables() -> None:
    for p, t in _targets(_dashboard()):
        expr = t["expr"]
        for selector in re.findall(r"(agenteval_\w+)(\{[^}]*\})?", expr):
            name, labels = selector
            per_agent = not name.startswith(("agenteval_spans", "agenteval_late", "agenteval_steps_dropped",
                                             "agenteval_processor", "agenteval_open", "agenteval_conversations",
                                             "agenteval_trajectories_evicted", "agenteval_unread", "agenteval_fragment",
                                             "agenteval_judge"))  # the judge's: by dimension, not agent
            if per_agent:
                assert 'service_name=~"$service_name"' in labels and 'agent_name=~"$agent_name"' in labels, \
                    (p["title"], expr)


def test_every_metric_named_is_exported(make_processor: Any) -> None:
    """Names in the queries against the names a real processor's registry exposes after a run."""
    # an expected tool and a loop (two identical lookups), so the path panels' series exist
    h: Harness = make_processor(ISSUE_POLICY.replace("tools:\n", "tools:\n  lookup_order: {expected: true}\n")
                                + "outputs: {loop_repeats: 2}\n")
    root = h.agent("support")
    h.chat(root, at=0.5, inp=100, out=10)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=1)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=2)
    h.tool(root, "create_claim", {"order_id": "1"}, at=3, error="timeout")
    h.end(root, 4)
    exported = {s.name for family in h.registry.collect() for s in family.samples}
    # the guard's counters: one call stopped, one it would have stopped (mode observe for that tool)
    g: Harness = make_processor(ISSUE_POLICY + "guard: {tools: {issue_refund: {mode: observe}}}\n")
    guard = g.processor.guard(tracer_provider=g.provider)
    root = g.agent("support")
    for at, tool in enumerate(("create_claim", "issue_refund")):
        g.tool(root, tool, {"order_id": "1"}, at=at + 1)
        assert guard.check(tool, {"order_id": "1"}, context=trace.set_span_in_context(root)).would_block
    g.end(root, 4)
    exported |= {s.name for family in g.registry.collect() for s in family.samples}
    # the judge's series: a callable judge on every run
    from otel_agenteval.judging import JudgeResult

    j: Harness = make_processor("judge: {rate: 1.0, dimensions: {helpfulness: {rubric: r}}}",
                                judge=lambda t: JudgeResult("helpfulness", 1.0, "pass"))
    j.run("support", [("lookup_order", {"order_id": "1"})])
    assert j.processor.judging is not None and j.processor.judging.queue.drain(10)
    exported |= {s.name for family in j.registry.collect() for s in family.samples}
    # pieces of runs, each a trace of its own: a workflow with a tool call inside it (put back
    # together), then two at once (not put back together, read apart)
    f: Harness = make_processor(ISSUE_POLICY)
    workflow = {"gen_ai.operation.name": "workflow"}
    for starts in ((0,), (10, 10.5)):
        roots = [f.start("workflow graph", None, at, workflow) for at in starts]
        for at in starts:
            tool = f.start("execute_tool lookup_order", None, at + 0.2, {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"})
            f.end(tool, at + 0.3)
        for i, root in enumerate(roots):
            f.end(root, starts[i] + 1)
    f.processor.force_flush()
    exported |= {s.name for family in f.registry.collect() for s in family.samples}
    named = {m for _, t in _targets(_dashboard()) for m in re.findall(r"\bagenteval_\w+", t["expr"])}
    assert named - exported == set()
