"""A real Prometheus scraping the demo: dashboards return data, alerts fire, p99 and exemplars are right.

Starts ``otel-agenteval demo --forever`` on a free loopback port and a real ``prometheus``
(Debian package, installed by ``.ci/install-tools.sh``) on another, configured from the shipped
``deploy/prometheus/prometheus.yml`` with 1s scrape and rule evaluation, the shipped rules, and
exemplar storage on. Both are always stopped by the fixture's finaliser. Without ``prometheus``
the module skips, except under ``CI`` where that is a failure.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from judge_support import fake_judge

from otel_agenteval.cli.demo_world import DEMO_POLICY
from otel_agenteval.metrics.prometheus import STEP_BUCKETS

ROOT = Path(__file__).resolve().parent.parent
PROM_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "agenteval.rules.yml"
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))

SEED = 11
RATE = 25  # demo runs per second
SERVICE = "support-demo"
# Grafana's variables and intervals as a user would have them: both demo agents picked.
SUBSTITUTE = {"$service_name": SERVICE, "$agent_name": "support|returns", "$__rate_interval": "15s",
              "$__interval": "5s", "$__range": "1m"}
SCRAPED_SECONDS = 18  # wait for this many scrapes before querying (the rate window is 15s)

pytestmark = pytest.mark.timeout(180)


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} not found on PATH under CI: .ci/install-tools.sh should have installed it")
        pytest.skip(f"{tool} not installed (apt-get install prometheus, or run .ci/install-tools.sh)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body = resp.read().decode()
    return json.loads(body) if body.startswith("{") else body


def _wait(what: str, check: Callable[[], Any], timeout: float, logs: list[Path]) -> Any:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (OSError, ValueError, KeyError) as exc:
            last = exc
        time.sleep(0.25)
    tails = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs if p.exists())
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last})\n{tails}")


@dataclass
class Stack:
    prom: str  # base URL of Prometheus
    demo_port: int
    started: float  # unix time the demo started
    logs: list[Path]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        reply = _get(f"{self.prom}/api/v1/query?{urllib.parse.urlencode(params)}")
        assert reply["status"] == "success", reply
        return list(reply["data"]["result"])

    def scalar(self, expr: str, at: float | None = None) -> float:
        [sample] = self.query(expr, at)
        return float(sample["value"][1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = _require("prometheus")
    tmp = tmp_path_factory.mktemp("prometheus")
    demo_port, prom_port = _free_port(), _free_port()

    # The shipped config, pointed at the demo, evaluated every second, without Alertmanager.
    config = yaml.safe_load(PROM_CONFIG.read_text())
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    config["rule_files"] = [str(RULES)]
    config.pop("alerting", None)
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "agenteval"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{demo_port}"]}]
    config["scrape_configs"] = [job]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))

    # the demo's own policy with a sampled judge on a scripted endpoint: the dashboard's judge row has data
    judge = fake_judge()
    endpoint = judge.__enter__()  # left in the finally below
    policy = {**DEMO_POLICY, "judge": {"rate": 0.5, "endpoint": {"base_url": endpoint.url, "model": "judge-1",
                                                                  "timeout_s": 5, "retries": 0},
                                       "dimensions": {"helpfulness": {"rubric": "Did the agent help?"}}}}
    (tmp / "policy.json").write_text(json.dumps(policy))

    logs = [tmp / "demo.log", tmp / "prometheus.log"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with logs[1].open("wb") as log:
            procs.append(subprocess.Popen(
                [prometheus, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}", "--enable-feature=exemplar-storage",
                 "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT))
        prom = f"http://127.0.0.1:{prom_port}"
        _wait("prometheus to be ready", lambda: "Ready" in _get(f"{prom}/-/ready"), 30, logs)
        started = time.time()
        with logs[0].open("wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "otel_agenteval", "demo", "--forever", "--rate", str(RATE), "--seed", str(SEED),
                 "--port", str(demo_port), "--addr", "127.0.0.1", "--quiet", "--format", "json",
                 "--policy", str(tmp / "policy.json")],
                stdout=log, stderr=subprocess.STDOUT))
        s = Stack(prom, demo_port, started, logs)
        _wait("the demo target to be up", lambda: s.query('up{job="agenteval"} == 1'), 30, logs)
        _wait(f"{SCRAPED_SECONDS} scrapes of the demo",
              lambda: s.scalar('count_over_time(up{job="agenteval"}[1m])') >= SCRAPED_SECONDS, 60, logs)
        yield s
    finally:
        for proc in reversed(procs):
            _stop(proc)
        judge.__exit__(None, None, None)


def _dashboard_queries() -> list[tuple[str, str, str]]:
    out = []
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        panels = [p for top in board["panels"] for p in (top, *top.get("panels", []))]
        for panel in panels:
            for target in panel.get("targets", []):
                out.append((path.name, f'{panel["title"]} [{target["refId"]}]', target["expr"]))
    return out


def _panel_expr(title: str) -> str:
    [expr] = [e for _, panel, e in _dashboard_queries() if panel == f"{title} [A]"]
    return expr


def _substitute(expr: str, **override: str) -> str:
    for var, value in {**SUBSTITUTE, **{f"${k}": v for k, v in override.items()}}.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def test_every_dashboard_query_returns_data(stack: Stack) -> None:
    queries = _dashboard_queries()
    assert len(queries) >= 25
    empty = []
    for board, panel, expr in queries:
        result = stack.query(_substitute(expr))
        values = [float(r["value"][1]) for r in result]
        if not any(math.isfinite(v) for v in values):
            empty.append(f"{board} / {panel}: {expr} -> {values}")
    assert empty == [], "queries without data:\n" + "\n".join(empty)


def test_critical_violation_alert_fires(stack: Stack) -> None:
    def firing() -> list[dict[str, Any]]:
        alerts = _get(f"{stack.prom}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == "AgentCriticalViolation" and a["state"] == "firing"]

    alerts = _wait("AgentCriticalViolation to fire", firing, 20, stack.logs)
    assert "duplicate_write" in {a["labels"]["rule"] for a in alerts}  # the demo's critical rule
    assert {a["labels"]["service_name"] for a in alerts} == {SERVICE}
    assert all(a["labels"]["severity"] == "critical" for a in alerts)
    everything = _get(f"{stack.prom}/api/v1/alerts")["data"]["alerts"]
    names = {a["labels"]["alertname"] for a in everything}
    assert any(a["labels"]["alertname"] == "AgentDuplicateWrite" and a["state"] == "firing" for a in everything)
    # a healthy monitor: scraped, no processor errors
    assert names.isdisjoint({"AgentEvalTargetMissing", "AgentEvalTargetDown", "AgentEvalProcessorErrors"})


def _bucket_of(value: float) -> tuple[float, float]:
    """(lower, upper] bounds of the histogram bucket holding ``value``."""
    lower = 0.0
    for le in STEP_BUCKETS:
        if value <= le:
            return lower, float(le)
        lower = float(le)
    return lower, math.inf


def test_step_count_percentiles_and_counts_match_the_demos_own(stack: Stack) -> None:
    """histogram_quantile over everything scraped vs. the exact percentiles of the same runs;
    the dashboard's in-range counts (range longer than the run) vs. the demo's exact counts.

    The demo is seeded: the first N runs of ``--forever`` are the runs of ``--runs N``, so a
    second, unserved demo with the same seed reports the exact numbers of what was scraped.
    """
    at = time.time() - 1
    runs = stack.scalar('sum(agenteval_trajectory_steps_count{service_name="support-demo"})', at)
    assert runs == stack.scalar('sum(agenteval_trajectories_total{service_name="support-demo"})', at)
    assert runs >= 100
    summary = _demo_summary(int(runs))
    assert summary["runs"] == runs
    for q in ("p50", "p95", "p99"):
        promql = (f"histogram_quantile(0.{q[1:]}, sum by (le) "
                  '(agenteval_trajectory_steps_bucket{service_name="support-demo"}))')
        got = stack.scalar(promql, at)
        lower, upper = _bucket_of(summary["steps"][q])
        assert lower < got <= upper, f"{q}: Prometheus {got}, demo {summary['steps'][q]} in ({lower}, {upper}]"

    # Every violation series was born after Prometheus started, most of them at 1: the in-range
    # counts must still be exact (plain increase() would miss the first violation of each).
    # Violations and tool calls are counted as each tool span ends, and a scrape is written family
    # by family while the demo runs on (the finished-run counts first, under one lock): the scrape
    # may also hold the runs that ended while it was written, and part of one in flight. Each of
    # those has ended by the next scrape: between the demo's counts for N runs, and for the next
    # scrape's count + 1.
    while time.time() < at + 2.5:
        time.sleep(0.1)
    later = stack.scalar('sum(agenteval_trajectories_total{service_name="support-demo"})', at + 1.5)
    assert later >= runs
    after = _demo_summary(int(later) + 1)
    everything = {"__range": "1h"}
    critical = stack.scalar(_substitute(_panel_expr("Critical violations"), **everything), at)
    assert summary["critical_violations"] <= critical <= after["critical_violations"]
    assert critical > 0
    by_rule: dict[str, float] = {}
    for row in stack.query(_substitute(_panel_expr("Violations in range by rule and agent"), **everything), at):
        by_rule[row["metric"]["rule"]] = by_rule.get(row["metric"]["rule"], 0) + float(row["value"][1])
    for rule in {*by_rule, *summary["violations"], *after["violations"]}:
        got = by_rule.get(rule, 0)
        assert summary["violations"].get(rule, 0) <= got <= after["violations"].get(rule, 0), rule
    errors = stack.query(_substitute(_panel_expr("Top tools by errors"), **everything), at)
    got_errors = sum(float(r["value"][1]) for r in errors)
    assert 0 < summary["tool_errors"] <= got_errors <= after["tool_errors"]


def _demo_summary(runs: int) -> dict[str, Any]:
    """The summary of an unserved demo of ``runs`` runs with the stack's seed (the same runs)."""
    done = subprocess.run(
        [sys.executable, "-m", "otel_agenteval", "demo", "--runs", str(runs), "--seed", str(SEED), "--no-serve",
         "--format", "json", "--quiet"], capture_output=True, text=True, timeout=60, check=True)
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def test_steps_exemplars_carry_trace_ids(stack: Stack) -> None:
    params = urllib.parse.urlencode({"query": 'agenteval_trajectory_steps_bucket{service_name="support-demo"}',
                                     "start": f"{stack.started - 5:.3f}", "end": f"{time.time():.3f}"})
    reply = _get(f"{stack.prom}/api/v1/query_exemplars?{params}")
    assert reply["status"] == "success"
    exemplars = [(series["seriesLabels"], e) for series in reply["data"] for e in series["exemplars"]]
    assert len(exemplars) >= 5
    for labels, e in exemplars:
        assert re.fullmatch(r"[0-9a-f]{32}", e["labels"]["trace_id"]), e
        assert labels["__name__"] == "agenteval_trajectory_steps_bucket"
        assert float(e["value"]) <= float(labels["le"])  # an exemplar sits in its bucket
