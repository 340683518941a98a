"""Soak: one ``serve`` replica under ``ulimit -n 1024`` and ``--memory-limit-mib 512``, honest load
first alone (the clean phase), then with hostile load beside it (the hostile phase).

- honest clients (``--clients``, 2): POST prebuilt 256-span OTLP/HTTP protobuf requests of
  complete agent runs (a root and tool spans, each run its own trace) as fast as answered,
  retrying 429/503 after ``Retry-After``; every 200 counts its spans as acknowledged;
- malformed bodies: the audit's shapes (``1e400``, a 100k-deep array, a kvlist 600 deep, a
  2 MiB string where ``resourceSpans`` goes, broken protobuf), one after the other;
- slow senders (``--slow``, 50): a request's headers a byte a second, reconnecting when cut off;
- idle connections (``--idle``, 1,100: more than the replica's descriptor limit), reopened as
  the replica closes them;
- a ``/healthz`` probe every 100 ms (its slowest answer is reported), and the RSS every second.

Reported: honest spans acknowledged per second in each phase and their ratio (the issue's bar:
within 20%), the slowest ``/healthz``, the peak RSS against the limit, the replica's counters
(refused, rejected, connections closed by reason), and whether every acknowledged span was
counted as accepted (nothing acknowledged lost). It is a script, not a test::

    .venv/bin/python benchmarks/soak.py                 # 10 minutes: 200 s clean, 400 s hostile
    .venv/bin/python benchmarks/soak.py --minutes 3
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

MIB = 1 << 20


def honest_body(rng: random.Random, runs: int = 32, tools: int = 7) -> tuple[bytes, int]:
    """``runs`` complete agent runs (root + ``tools`` tool spans), each its own trace."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "soak"
    scope = rs.scope_spans.add()
    n = 0
    for _ in range(runs):
        trace_id = rng.getrandbits(128).to_bytes(16, "big")
        root_id = rng.getrandbits(64).to_bytes(8, "big")
        for i in range(tools):
            s = scope.spans.add()
            s.trace_id, s.span_id, s.parent_span_id = trace_id, rng.getrandbits(64).to_bytes(8, "big"), root_id
            s.name, s.kind = "execute_tool lookup", Span.SPAN_KIND_INTERNAL
            s.start_time_unix_nano, s.end_time_unix_nano = 1_000_000_000 + i, 1_000_000_100 + i
            for key, value in (("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "lookup_order"),
                               ("gen_ai.tool.call.arguments", json.dumps({"order": rng.randrange(10**9)}))):
                a = s.attributes.add()
                a.key, a.value.string_value = key, value
            n += 1
        root = scope.spans.add()
        root.trace_id, root.span_id, root.name = trace_id, root_id, "invoke_agent support"
        root.start_time_unix_nano, root.end_time_unix_nano = 1_000_000_000, 2_000_000_000
        for key, value in (("gen_ai.operation.name", "invoke_agent"), ("gen_ai.agent.name", "support")):
            a = root.attributes.add()
            a.key, a.value.string_value = key, value
        n += 1
    return req.SerializeToString(), n


def malformed_bodies() -> list[tuple[str, bytes]]:
    span = ('{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "s", '
            '"startTimeUnixNano": %s, "attributes": %s}')
    kvlist = '{"stringValue": "leaf"}'
    for _ in range(600):
        kvlist = '{"kvlistValue": {"values": [{"key": "k", "value": ' + kvlist + '}]}}'
    wrap = '{"resourceSpans": [{"scopeSpans": [{"spans": [%s]}]}]}'
    js, pb = "application/json", "application/x-protobuf"
    return [
        (js, (wrap % (span % ("1e400", "[]"))).encode()),
        (js, b"[" * 100_000 + b"]" * 100_000),
        (js, (wrap % (span % ('"1"', '[{"key": "k", "value": ' + kvlist + "}]"))).encode()),
        (js, json.dumps({"resourceSpans": "x" * (2 * MIB)}).encode()),
        (pb, b"\xff\xff\xff\xff not protobuf"),
    ]


class Soak:
    def __init__(self, limit_mib: int, clients: int, slow: int, idle: int) -> None:
        def low_fd_limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

        cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--grpc-port", "-1", "--http-port", "0",
               "--metrics-port", "0", "--no-log-violations", "--memory-limit-mib", str(limit_mib), "--grace", "1",
               "--http-idle-timeout", "30", "--http-read-timeout", "10"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     preexec_fn=low_fd_limit)
        assert self.proc.stdout is not None
        line = json.loads(self.proc.stdout.readline())
        self.http, self.metrics = line["http_port"], line["metrics_port"]
        self.limit_mib, self.clients, self.slow, self.idle = limit_mib, clients, slow, idle
        self.acked = 0
        self.acked_lock = threading.Lock()
        self.hostile = threading.Event()
        self.stop = threading.Event()
        self.rss_peak = 0
        self.healthz_worst = 0.0
        self.healthz_fail = 0
        self.statuses: dict[str, int] = {}

    def _count(self, what: str) -> None:
        with self.acked_lock:
            self.statuses[what] = self.statuses.get(what, 0) + 1

    def honest(self, seed: int) -> None:
        rng = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", self.http, timeout=30)
        while not self.stop.is_set():
            body, n = honest_body(rng)
            while not self.stop.is_set():
                try:
                    conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
                    resp = conn.getresponse()
                    resp.read()
                except OSError:
                    self._count("honest_connection_error")
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.http, timeout=30)
                    continue
                self._count(f"honest_{resp.status}")
                if resp.status == 200:
                    with self.acked_lock:
                        self.acked += n
                    break
                time.sleep(float(resp.getheader("retry-after") or 1) * rng.random())

    def malformed(self) -> None:
        bodies = malformed_bodies()
        while not self.stop.is_set():
            self.hostile.wait()
            for ctype, body in bodies:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", self.http, timeout=30)
                    conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": ctype})
                    self._count(f"malformed_{conn.getresponse().status}")
                    conn.close()
                except OSError:
                    self._count("malformed_connection_error")
                time.sleep(0.05)

    def slow_sender(self) -> None:
        request = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n" * 100
        while not self.stop.is_set():
            self.hostile.wait()
            try:
                with socket.create_connection(("127.0.0.1", self.http), timeout=5) as s:
                    for b in request:
                        if self.stop.is_set():
                            return
                        s.sendall(bytes([b]))
                        time.sleep(1.0)
            except OSError:
                self._count("slow_sender_cut_off")

    def idle_holder(self, port: int, n: int) -> None:
        self.hostile.wait()
        held: list[socket.socket] = []
        while not self.stop.is_set():
            alive = []
            for s in held:
                try:
                    s.setblocking(False)
                    if s.recv(1) == b"":
                        s.close()
                        self._count("idle_closed_by_server")
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    self._count("idle_closed_by_server")
                    continue
                alive.append(s)
            held = alive
            while len(held) < n and not self.stop.is_set():
                try:
                    held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
                except OSError:
                    self._count("idle_connect_failed")
                    break
            time.sleep(0.5)
        for s in held:
            s.close()

    def watch(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/healthz", timeout=10) as r:
                    ok = r.status == 200
            except OSError:
                ok = False
            took = time.monotonic() - t0
            if not ok:
                self.healthz_fail += 1
            self.healthz_worst = max(self.healthz_worst, took)
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        self.rss_peak = max(self.rss_peak, int(line.split()[1]) * 1024)
            time.sleep(0.1)

    def run(self, clean_s: float, hostile_s: float) -> dict[str, Any]:
        threads = [threading.Thread(target=self.honest, args=(i,), daemon=True) for i in range(self.clients)]
        threads += [threading.Thread(target=self.watch, daemon=True), threading.Thread(target=self.malformed, daemon=True)]
        threads += [threading.Thread(target=self.slow_sender, daemon=True) for _ in range(self.slow)]
        threads += [threading.Thread(target=self.idle_holder, args=(self.http, self.idle // 2), daemon=True),
                    threading.Thread(target=self.idle_holder, args=(self.metrics, self.idle - self.idle // 2),
                                     daemon=True)]
        idle_rss = _rss(self.proc.pid)
        for t in threads:
            t.start()
        time.sleep(clean_s)
        clean = self.acked / clean_s
        clean_healthz, self.healthz_worst = self.healthz_worst, 0.0
        a0 = self.acked
        self.hostile.set()
        time.sleep(hostile_s)
        hostile = (self.acked - a0) / hostile_s
        self.stop.set()
        time.sleep(2.0)
        acked = self.acked
        m = _scrape(self.metrics)
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        pick = ("agenteval_receiver_requests_total", "agenteval_receiver_spans_total",
                "agenteval_receiver_connections_closed_total", "agenteval_receiver_traces_total",
                "agenteval_receiver_errors_total")
        return {
            "clean_s": clean_s, "hostile_s": hostile_s, "limit_mib": self.limit_mib, "fd_limit": 1024,
            "honest_spans_per_s_clean": round(clean), "honest_spans_per_s_hostile": round(hostile),
            "hostile_over_clean": round(hostile / clean, 3) if clean else None,
            "healthz_worst_s_clean": round(clean_healthz, 3), "healthz_worst_s_hostile": round(self.healthz_worst, 3),
            "healthz_failures": self.healthz_fail, "idle_rss_mib": round(idle_rss / MIB, 1),
            "rss_peak_mib": round(self.rss_peak / MIB, 1),
            "acknowledged_spans": acked,
            "accepted_spans": m.get('agenteval_receiver_spans_total{protocol="http",result="accepted"}', 0),
            "client_statuses": dict(sorted(self.statuses.items())),
            "counters": {k: v for k, v in sorted(m.items()) if k.startswith(pick) and v},
        }


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("agenteval_") and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="total: a third clean, two thirds hostile")
    ap.add_argument("--limit-mib", type=int, default=512)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--slow", type=int, default=50)
    ap.add_argument("--idle", type=int, default=1100)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))  # this client's own sockets
    total = a.minutes * 60
    print(json.dumps(Soak(a.limit_mib, a.clients, a.slow, a.idle).run(total / 3, 2 * total / 3), indent=1))


if __name__ == "__main__":
    main()
