"""A real multi-process app (spawned worker processes, each with its own SDK and OTLP exporter)
exporting to one ``serve``: the totals equal the sum of what the workers did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from serve_support import samples, scrape, serve_process, settled, total, wait_until

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "deploy" / "collector" / "agent_app.py"
POLICY = ROOT / "examples" / "policies" / "support-agent.yaml"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_workers_exporting_to_one_serve_sum_up(protocol):
    with serve_process("--policy", str(POLICY), "--grace", "0.3", "--idle-timeout", "2",
                       "--no-log-violations") as (_, info):
        endpoint = (f"http://127.0.0.1:{info['http_port']}" if protocol == "http"
                    else f"127.0.0.1:{info['grpc_port']}")
        out = subprocess.run([sys.executable, str(APP), "--workers", "3", "--runs", "30", "--endpoint", endpoint,
                              "--protocol", protocol, "--policy", str(POLICY), "--report"],
                             capture_output=True, text=True, timeout=240,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})  # the in-place compiled build
        assert out.returncode == 0, out.stderr[-3000:]
        workers = json.loads(out.stdout)["workers"]
        assert [w["runs"] for w in workers] == [30, 30, 30]
        summed: dict = defaultdict(float)
        for w in workers:
            for key, v in samples(w["metrics"]).items():
                summed[key] += v
        assert total(summed, "agenteval_trajectories_total") == 90
        wait_until(settled(info["metrics_port"], 90), timeout=60, what="all 90 runs played")
        served = scrape(info["metrics_port"])
    assert total(summed, "agenteval_violations_total") > 0  # the workers' runs break rules
    assert {k: served.get(k, 0.0) for k in summed} == pytest.approx(dict(summed))
    assert total(served, "agenteval_late_spans_total") == 0
