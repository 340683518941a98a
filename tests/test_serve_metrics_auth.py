"""With a token, /metrics needs it too: a real Prometheus scrapes with its ``authorization``
config (``Authorization: Bearer <credentials>``); a job without it is refused (up == 0), counted."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from serve_support import free_port, get, scrape, value

from otel_agenteval.receiver import Receiver, ServeConfig


def _up(prom_port: int) -> dict[str, float]:
    q = urllib.parse.urlencode({"query": "up"})
    with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?{q}", timeout=5) as r:
        doc = json.loads(r.read())
    return {s["metric"]["job"]: float(s["value"][1]) for s in doc["data"]["result"]}


@pytest.mark.parametrize("separate", [False, True])
def test_prometheus_scrapes_with_its_authorization_config_and_without_it_is_refused(tmp_path, separate):
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus is installed by .ci/install-tools.sh")
    token = "scrape-s3cret" if separate else "otlp-s3cret"
    cfg = ServeConfig(grpc_port=-1, http_port=0, metrics_port=0, log_violations=False, token="otlp-s3cret",
                      metrics_token="scrape-s3cret" if separate else None)
    r = Receiver(cfg, None, registry=CollectorRegistry()).start()
    (tmp_path / "token").write_text(token + "\n")
    target = f"127.0.0.1:{r.ports.metrics}"
    (tmp_path / "prometheus.yml").write_text(f"""\
global: {{scrape_interval: 1s, scrape_timeout: 1s}}
scrape_configs:
  - job_name: with_token
    authorization: {{type: Bearer, credentials_file: {tmp_path / 'token'}}}
    static_configs: [{{targets: ["{target}"]}}]
  - job_name: without_token
    static_configs: [{{targets: ["{target}"]}}]
""")
    port = free_port()
    proc = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        up: dict[str, float] = {}
        while time.monotonic() < deadline:
            try:
                up = _up(port)
            except OSError:
                up = {}
            if up.get("with_token") == 1 and "without_token" in up:
                break
            time.sleep(0.5)
        assert up == {"with_token": 1.0, "without_token": 0.0}, up
        assert get(f"http://{target}/metrics")[0] == 401
        assert get(f"http://{target}/metrics", {"Authorization": "Bearer otlp-s3cret"})[0] == (401 if separate else 200)
        assert get(f"http://{target}/healthz")[0] == 200 and get(f"http://{target}/readyz")[0] == 200
        s = scrape(r.ports.metrics, {"Authorization": f"Bearer {token}"})
        assert value(s, "agenteval_receiver_requests_total", protocol="metrics", result="unauthorized") >= 2
    finally:
        proc.terminate()
        proc.wait(20)
        r.stop()
