"""Soak: one ``serve`` replica under ``ulimit -n 1024`` and ``--memory-limit-mib 512``, honest load
throughout, hostile load beside it every other phase (clean, hostile, clean, hostile, ...: ABAB,
so a busy shared machine weighs on both kinds of phase alike).

- honest clients (``--clients``, 2, a process each, as separate exporters would be): POST
  256-span OTLP/HTTP protobuf requests of complete agent runs (a root and tool spans, each run
  its own trace: a prebuilt body with fresh trace ids) as fast as answered, on a kept-alive
  connection, retrying 429/503 after ``Retry-After``; every 200 counts its spans as acknowledged;
- hostile (one process of its own, in hostile phases only):
  - malformed bodies: the audit's shapes (``1e400``, a 100k-deep array, a kvlist 600 deep, a
    2 MiB string where ``resourceSpans`` goes, broken protobuf), one after the other;
  - slow senders (``--slow``, 50): a request's headers a byte a second, reconnecting when cut off;
  - idle connections (``--idle``, 1,100: more than the replica's descriptor limit, half on the
    OTLP port, half on the metrics port), reopened as soon as the replica closes or refuses them;
- a ``/healthz`` probe every 100 ms on a new connection (its slowest answer is reported per
  phase), and the replica's RSS and CPU time.

Reported: honest spans acknowledged per second in each phase, each hostile phase over the clean
phase before it (the issue's bar: >= 0.8), the slowest ``/healthz`` (bar: < 1 s), RSS per phase
(flat, under the limit), the replica's counters, every acknowledged span counted as accepted,
no 500, and the load average. It is a script, not a test::

    .venv/bin/python benchmarks/soak.py                           # 10 minutes, 60 s phases
    .venv/bin/python benchmarks/soak.py --minutes 2 --phase-s 30
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

MIB = 1 << 20
ctx = multiprocessing.get_context("fork")


def honest_body(rng: random.Random, runs: int = 32, tools: int = 7) -> tuple[bytes, list[bytes], int]:
    """``runs`` complete agent runs (root + ``tools`` tool spans), each its own trace; the trace
    ids are returned too, for :func:`fresh` to replace."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "soak"
    scope = rs.scope_spans.add()
    n, trace_ids = 0, []
    for _ in range(runs):
        trace_id = rng.getrandbits(128).to_bytes(16, "big")
        trace_ids.append(trace_id)
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
    return req.SerializeToString(), trace_ids, n


def fresh(body: bytes, trace_ids: list[bytes], rng: random.Random) -> bytes:
    """The same runs under new trace ids (each a new trace to the replica)."""
    for old in trace_ids:
        body = body.replace(old, rng.randbytes(16))
    return body


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


def honest(port: int, seed: int, acked: Any, stop: Any, out: Any) -> None:
    """One honest client (its own process) until ``stop``; its statuses go to ``out``."""
    rng = random.Random(seed)
    template, trace_ids, n = honest_body(rng)
    statuses: Counter[str] = Counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.is_set():
        body = fresh(template, trace_ids, rng)
        while not stop.is_set():
            try:
                conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
                resp = conn.getresponse()
                resp.read()
            except OSError:
                statuses["honest_connection_error"] += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            statuses[f"honest_{resp.status}"] += 1
            if resp.status == 200:
                with acked.get_lock():
                    acked.value += n
                break
            time.sleep(float(resp.getheader("retry-after") or 1) * rng.random())
    out.put(dict(statuses))


class Hostile:
    """The hostile load, in a process of its own: active while ``on`` is set, until ``stop``."""

    def __init__(self, http_port: int, metrics_port: int, slow: int, idle: int, on: Any, stop: Any) -> None:
        self.http, self.metrics, self.slow, self.idle, self.on, self.stop = http_port, metrics_port, slow, idle, on, stop
        self.statuses: Counter[str] = Counter()
        self.lock = threading.Lock()

    def count(self, what: str) -> None:
        with self.lock:
            self.statuses[what] += 1

    def run(self, out: Any) -> None:
        threads = [threading.Thread(target=self.malformed, daemon=True)]
        threads += [threading.Thread(target=self.slow_sender, daemon=True) for _ in range(self.slow)]
        threads += [threading.Thread(target=self.idle_holder, args=(self.http, self.idle // 2), daemon=True),
                    threading.Thread(target=self.idle_holder, args=(self.metrics, self.idle - self.idle // 2),
                                     daemon=True)]
        for t in threads:
            t.start()
        self.stop.wait()
        for t in threads:
            t.join(15)
        out.put(dict(self.statuses))

    def active(self) -> bool:
        while not self.stop.is_set():
            if self.on.wait(0.5):
                return True
        return False

    def malformed(self) -> None:
        bodies = malformed_bodies()
        while self.active():
            for ctype, body in bodies:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", self.http, timeout=30)
                    conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": ctype})
                    self.count(f"malformed_{conn.getresponse().status}")
                    conn.close()
                except OSError:
                    self.count("malformed_connection_error")
                time.sleep(0.05)

    def slow_sender(self) -> None:
        request = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n" * 100
        while self.active():
            try:
                with socket.create_connection(("127.0.0.1", self.http), timeout=5) as s:
                    for b in request:
                        if not self.on.is_set():
                            break
                        s.sendall(bytes([b]))
                        time.sleep(1.0)
            except OSError:
                self.count("slow_sender_cut_off")

    def idle_holder(self, port: int, n: int) -> None:
        held: list[socket.socket] = []
        while not self.stop.is_set():
            if not self.on.is_set():
                for s in held:
                    s.close()
                held = []
                self.on.wait(0.5)
                continue
            alive = []
            for s in held:
                try:
                    got = s.recv(4096)  # a 503 (refused) or nothing (closed): gone either way
                    s.close()
                    self.count("idle_closed_by_server" if not got else "idle_refused_by_server")
                    continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    self.count("idle_closed_by_server")
                    continue
                alive.append(s)
            held = alive
            while len(held) < n and self.on.is_set():
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=2)
                    s.setblocking(False)
                    held.append(s)
                except OSError:
                    self.count("idle_connect_failed")
                    break
            time.sleep(0.5)
        for s in held:
            s.close()


class Watch:
    """``/healthz`` every 100 ms (slowest and failures per phase), the replica's RSS every probe."""

    def __init__(self, pid: int, metrics_port: int) -> None:
        self.pid, self.port = pid, metrics_port
        self.worst, self.failures, self.rss_peak = 0.0, 0, 0
        self.stop = threading.Event()

    def take(self) -> dict[str, Any]:
        """This phase's figures, and a new phase begins."""
        out = {"healthz_worst_s": round(self.worst, 3), "healthz_failures": self.failures,
               "rss_peak_mib": round(self.rss_peak / MIB, 1)}
        self.worst, self.failures, self.rss_peak = 0.0, 0, 0
        return out

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=10) as r:
                    ok = r.status == 200
            except OSError:
                ok = False
            self.worst = max(self.worst, time.monotonic() - t0)
            self.failures += not ok
            self.rss_peak = max(self.rss_peak, _rss(self.pid))
            time.sleep(0.1)


def start_replica(limit_mib: int) -> tuple[subprocess.Popen[str], int, int]:
    def low_fd_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--grpc-port", "-1", "--http-port", "0",
           "--metrics-port", "0", "--no-log-violations", "--memory-limit-mib", str(limit_mib), "--grace", "1",
           "--http-idle-timeout", "30", "--http-read-timeout", "10"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=low_fd_limit)
    assert proc.stdout is not None
    line = json.loads(proc.stdout.readline())
    return proc, line["http_port"], line["metrics_port"]


def soak(minutes: float, phase_s: float, limit_mib: int, clients: int, slow: int, idle: int) -> dict[str, Any]:
    proc, http_port, metrics_port = start_replica(limit_mib)
    idle_rss = _rss(proc.pid)
    acked, stop, on, out = ctx.Value("q", 0), ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=honest, args=(http_port, i, acked, stop, out)) for i in range(clients)]
    hostile = Hostile(http_port, metrics_port, slow, idle, on, stop)
    procs.append(ctx.Process(target=hostile.run, args=(out,)))
    watch = Watch(proc.pid, metrics_port)
    watcher = threading.Thread(target=watch.run, daemon=True)
    load_before = os.getloadavg()
    for p in procs:
        p.start()
    watcher.start()
    phases = []
    for i in range(max(2, round(minutes * 60 / phase_s))):
        kind = "hostile" if i % 2 else "clean"
        if kind == "hostile":
            on.set()
        a0, t0 = acked.value, time.monotonic()
        cpu0 = [_cpu_s(pid) for pid in (proc.pid, procs[-1].pid, *(p.pid for p in procs[:-1]))]
        time.sleep(phase_s)
        took = time.monotonic() - t0
        replica, hostile_client, *honest_clients = (
            round((_cpu_s(pid) - c) / took, 2) for pid, c in zip((proc.pid, procs[-1].pid, *(p.pid for p in procs[:-1])),
                                                               cpu0))
        phase = {"phase": kind, "honest_spans_per_s": round((acked.value - a0) / took),
                 "replica_cpu_share": replica, "hostile_client_cpu_share": hostile_client,
                 "honest_clients_cpu_share": round(sum(honest_clients), 2), **watch.take(),
                 "load_average_1m": round(os.getloadavg()[0], 1)}
        on.clear()
        phases.append(phase)
        print(json.dumps(phase), file=sys.stderr, flush=True)
    stop.set()
    statuses: Counter[str] = Counter()
    for _ in procs:
        statuses.update(out.get(timeout=60))
    for p in procs:
        p.join(30)
    watch.stop.set()
    watcher.join(5)
    time.sleep(2.0)
    m = _scrape(metrics_port)
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    ratios = [h["honest_spans_per_s"] / c["honest_spans_per_s"] for c, h in zip(phases[::2], phases[1::2])
              if c["honest_spans_per_s"]]
    pick = ("agenteval_receiver_requests_total", "agenteval_receiver_spans_total",
            "agenteval_receiver_connections_closed_total", "agenteval_receiver_traces_total",
            "agenteval_receiver_errors_total")
    return {
        "minutes": round(len(phases) * phase_s / 60, 1), "phase_s": phase_s, "limit_mib": limit_mib,
        "fd_limit": 1024, "load_average_before": [round(x, 1) for x in load_before],
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
        "hostile_over_clean": [round(r, 3) for r in ratios],
        "hostile_over_clean_median": round(sorted(ratios)[len(ratios) // 2], 3) if ratios else None,
        "healthz_worst_s": max(p["healthz_worst_s"] for p in phases),
        "healthz_failures": sum(p["healthz_failures"] for p in phases),
        "idle_rss_mib": round(idle_rss / MIB, 1), "rss_peak_mib": max(p["rss_peak_mib"] for p in phases),
        "acknowledged_spans": acked.value,
        "accepted_spans": m.get('agenteval_receiver_spans_total{protocol="http",result="accepted"}', 0),
        "http_500": sum(v for k, v in statuses.items() if k.endswith("_500")),
        "phases": phases,
        "client_statuses": dict(sorted(statuses.items())),
        "counters": {k: v for k, v in sorted(m.items()) if k.startswith(pick) and v},
    }


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    ap.add_argument("--minutes", type=float, default=10.0, help="in all: clean and hostile phases by turns")
    ap.add_argument("--phase-s", type=float, default=60.0, help="each phase's length")
    ap.add_argument("--limit-mib", type=int, default=512)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--slow", type=int, default=50)
    ap.add_argument("--idle", type=int, default=1100)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))  # the clients' own sockets
    print(json.dumps(soak(a.minutes, a.phase_s, a.limit_mib, a.clients, a.slow, a.idle), indent=1))


if __name__ == "__main__":
    main()
