"""The real OpenTelemetry Collector (.ci/build-collector.sh): every shipped config loads, and behind
it three ``serve`` replicas get every run whole, once, even when one is killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from collector_support import (
    COMPOSE_CONFIG,
    ROOT,
    collector,
    collector_binary,
    kubernetes_collector_config,
    loopback_config,
    wait_healthy,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from serve_support import free_port, get, samples, total, wait_until
from wal_support import DUPLICATE_POLICY, duplicate_run

SHIPPED = sorted((ROOT / "deploy" / "collector").glob("*.yaml"))
TOKEN = "collector-test-token"
SCRAPE_AUTH = {"Authorization": f"Bearer {TOKEN}"}  # /metrics needs the token too (as Prometheus sends it)
# serve's default grace: after the kill the Collector retries the victim's batches on its backoff
# (1 s, x1.5, +-50%), so a child can come seconds after its recovered root (docs/serve.md)
GRACE = 5


@pytest.mark.parametrize("name", [*(p.name for p in SHIPPED), "kubernetes/collector.yaml#ConfigMap"])
def test_every_shipped_collector_config_loads_in_the_real_collector(name, tmp_path):
    binary = collector_binary()
    if name.startswith("kubernetes/"):
        path = tmp_path / "configmap.yaml"
        path.write_text(kubernetes_collector_config())
    else:
        path = ROOT / "deploy" / "collector" / name
    out = subprocess.run([binary, "validate", "--config", str(path)], capture_output=True, text=True, timeout=60,
                         env={"AGENTEVAL_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, f"{name}: {out.stderr[-2000:]}"


# --- three replicas behind the Collector ---------------------------------------------------------
class Replica:
    """One ``serve --wal-dir`` process on fixed ports (the static resolver names them)."""

    def __init__(self, name: str, workdir: Path, policy: Path) -> None:
        self.name = name
        self.grpc, self.http, self.metrics = free_port(), free_port(), free_port()
        self.wal = workdir / f"wal-{name}"
        self.policy = policy
        self.proc: subprocess.Popen[str] | None = None
        self.before_restarts = {"runs": 0.0, "duplicates": 0.0}  # counted by earlier lives (Prometheus: increase())
        self.last = {"runs": 0.0, "duplicates": 0.0}
        self.lock = threading.Lock()
        self.recovered: dict[str, object] = {}

    def start(self) -> None:
        cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--grpc-port", str(self.grpc),
               "--http-port", str(self.http), "--metrics-port", str(self.metrics), "--policy", str(self.policy),
               "--wal-dir", str(self.wal), "--grace", str(GRACE), "--token-env", "AGENTEVAL_TOKEN",
               "--no-log-violations"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "AGENTEVAL_TOKEN": TOKEN})
        assert self.proc.stdout is not None and self.proc.stderr is not None
        line = self.proc.stdout.readline()
        assert line, f"replica {self.name} did not start: {self.proc.stderr.read()}"
        for err in self.proc.stderr if "--wal-dir" in cmd else ():
            if '"wal_recovered"' in err:
                self.recovered = json.loads(err)
                break

    def scrape(self) -> dict[str, float] | None:
        """Counts now, and remembered (a scrape that fails, as the process dies, counts nothing)."""
        with self.lock:  # not across a kill: a scrape of the old life is the old life's
            try:
                url = f"http://127.0.0.1:{self.metrics}/metrics"
                status, body = get(url, SCRAPE_AUTH, timeout=5) if self.alive() else (0, b"")
            except OSError:  # restarting: not listening yet
                return None
            if status != 200:
                return None
            s = samples(body.decode())
            got = {"runs": total(s, "agenteval_trajectories_total"),
                   "duplicates": total(s, "agenteval_violations_total", rule="duplicate_write"),
                   "incomplete": total(s, "agenteval_trajectories_total", outcome="incomplete"),
                   "late": total(s, "agenteval_late_spans_total"),
                   "held": total(s, "agenteval_receiver_held_spans") + total(s, "agenteval_receiver_queue_spans")}
            self.last = {"runs": got["runs"], "duplicates": got["duplicates"]}
        return got

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        with self.lock:  # the last successful scrape is what Prometheus saw of this life
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            for k in self.before_restarts:
                self.before_restarts[k] += self.last[k]
            self.last = {"runs": 0.0, "duplicates": 0.0}

    def counted(self, key: str) -> float:
        return self.before_restarts[key] + self.last[key]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _app(endpoint: str, runs: range, stop: threading.Event) -> None:
    """An agent app: the SDK's BatchSpanProcessor and OTLP/gRPC exporter, to the Collector."""
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True),
                                                   max_queue_size=200_000, schedule_delay_millis=100))
    tracer = provider.get_tracer("app")
    for i in runs:
        if stop.is_set():
            break
        duplicate_run(tracer, i)
        if i % 50 == 0:
            time.sleep(0.05)  # spread over a few seconds: the kill lands mid-load
    provider.shutdown()  # flushes what is queued


def test_three_replicas_behind_the_collector_count_every_run_once_through_a_kill_9(tmp_path):
    collector_binary()
    policy = tmp_path / "policy.yaml"
    policy.write_text(DUPLICATE_POLICY)
    replicas = [Replica(n, tmp_path, policy) for n in "abc"]
    threads = [threading.Thread(target=r.start) for r in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    grpc_port, http_port, health_port, metrics_port = free_port(), free_port(), free_port(), free_port()
    config = loopback_config(COMPOSE_CONFIG, [f"127.0.0.1:{r.grpc}" for r in replicas], grpc_port, http_port,
                             health_port, metrics_port)
    stop = threading.Event()
    runs_per_app, apps = 600, 4
    try:
        with collector(config, tmp_path, {"AGENTEVAL_TOKEN": TOKEN}) as proc:
            wait_healthy(health_port, proc, tmp_path / "otelcol.log")
            scraping = True

            def scraper() -> None:  # Prometheus, every 250 ms
                while scraping:
                    for r in replicas:
                        r.scrape()
                    time.sleep(0.25)

            scrape_thread = threading.Thread(target=scraper, daemon=True)
            scrape_thread.start()
            senders = [threading.Thread(target=_app, args=(f"127.0.0.1:{grpc_port}",
                                                           range(k * runs_per_app, (k + 1) * runs_per_app), stop))
                       for k in range(apps)]
            for t in senders:
                t.start()
            victim = replicas[1]
            wait_until(lambda: (victim.scrape() or {}).get("runs", 0) >= 100, timeout=60, what="load on the victim")
            victim.kill()  # mid-load, with runs held and acknowledged
            time.sleep(1.0)
            victim.start()
            assert victim.recovered.get("cut_bytes") == 0
            for t in senders:
                t.join(120)
            sent = apps * runs_per_app

            def settled() -> bool:
                got = [r.scrape() for r in replicas]
                return all(g is not None and g["held"] == 0 for g in got) and \
                    sum(r.counted("runs") for r in replicas) >= sent

            wait_until(settled, timeout=90, what=f"{sent} runs counted")
            time.sleep(GRACE + 0.5)  # a grace period more: anything counted twice would show now
            final = [r.scrape() for r in replicas]
            scraping = False
            scrape_thread.join(5)
        per_replica = {r.name: r.counted("runs") for r in replicas}
        assert sum(per_replica.values()) == sent, (per_replica, victim.recovered)
        assert sum(r.counted("duplicates") for r in replicas) == sent  # every duplicate write found, once
        assert all(f is not None and f["incomplete"] == 0 and f["late"] == 0 for f in final), final  # runs whole
        assert all(v > sent / 10 for v in per_replica.values()), per_replica  # spread by trace id
        assert victim.recovered["spans"] > 0, victim.recovered  # the kill did land on held, acknowledged runs
    finally:
        stop.set()
        for r in replicas:
            r.stop()
