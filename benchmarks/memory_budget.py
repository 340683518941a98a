"""``serve --memory-limit-mib``: peak RSS under held big spans and concurrent big uploads.

A ``serve`` process (the CLI, in a child process) is given, one case after the other:

- ``held``: N spans with a 64 KiB attribute each, in traces whose root never comes (so every
  span is held until the idle timeout), sent by 4 threads in requests of 16 spans;
- ``uploads``: C concurrent uploads of one body of ~U MiB each (big spans), each retried after
  its ``Retry-After`` until accepted or ``--attempts`` run out.

It prints the idle RSS, the peak RSS (``VmHWM``) after each case, the RSS once the burst is over,
the RSS once the idle timeout has played every held trace (the budget is empty: what is left
above the idle RSS is what the allocator and the interpreter kept), and the counters: requests refused for memory, traces played early.
Acceptance (issue 28): peak <= limit + idle baseline + 150 MiB.

::

    .venv/bin/python benchmarks/memory_budget.py                       # 256 MiB, 40k spans, 100 x 15 MiB
    .venv/bin/python benchmarks/memory_budget.py --held 4000 --uploads 20 --upload-mib 3 --limit-mib 64
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

MIB = 1 << 20


def held_request(n: int, attr_bytes: int, rng: random.Random) -> bytes:
    """``n`` tool spans of one trace whose parent (the root) never comes, each with a big attribute."""
    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    trace_id = rng.getrandbits(128).to_bytes(16, "big")
    parent = rng.getrandbits(64).to_bytes(8, "big")
    for _ in range(n):
        s = scope.spans.add()
        s.trace_id = trace_id
        s.span_id = rng.getrandbits(64).to_bytes(8, "big")
        s.parent_span_id = parent
        s.name = "execute_tool lookup"
        s.kind = Span.SPAN_KIND_INTERNAL
        s.start_time_unix_nano = 1_000_000_000
        s.end_time_unix_nano = 2_000_000_000
        for key, value in (("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "lookup"),
                           ("gen_ai.tool.call.result", "x" * attr_bytes)):
            kv = s.attributes.add()
            kv.key = key
            kv.value.string_value = value
    return req.SerializeToString()


def post(port: int, body: bytes, timeout: float = 60) -> tuple[int, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader("retry-after")
    except OSError:
        return 0, None
    finally:
        conn.close()


def rss(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("agenteval_receiver_") and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


class Serve:
    """``otel-agenteval serve`` in a child process on free ports."""

    def __init__(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--grpc-port", "-1", "--http-port", "0",
               "--metrics-port", "0", "--no-log-violations", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = json.loads(self.proc.stdout.readline())
        self.http, self.metrics = line["http_port"], line["metrics_port"]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def send_held(port: int, spans: int, attr_bytes: int, per_request: int = 16, threads: int = 4) -> dict[int, int]:
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def one(seed: int) -> None:
        rng = random.Random(seed)
        body = held_request(per_request, attr_bytes, rng)
        for _ in range(30):
            status, retry = post(port, body)
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
            if status != 429:
                return
            time.sleep(float(retry or 1) * 0.2)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(spans // per_request)))
    return statuses


def send_uploads(port: int, uploads: int, upload_mib: float, attempts: int) -> dict[int, int]:
    per_span = 64 * 1024
    body = held_request(max(1, int(upload_mib * MIB) // per_span), per_span, random.Random(7))
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def one(_: int) -> None:
        for _ in range(attempts):
            status, retry = post(port, body)
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
            if status != 429:
                return
            time.sleep(float(retry or 1) * random.random())

    with ThreadPoolExecutor(uploads) as pool:
        list(pool.map(one, range(uploads)))
    return statuses


def run(limit_mib: int, held: int, uploads: int, upload_mib: float, attempts: int, idle_s: float,
        settle: bool = False) -> dict[str, Any]:
    max_body = max(4 * MIB, int(upload_mib * MIB) + MIB)
    serve = Serve("--memory-limit-mib", str(limit_mib), "--max-body-bytes", str(max_body),
                  "--idle-timeout", str(idle_s), "--max-held-spans", "1000000")
    try:
        time.sleep(1.0)
        out: dict[str, Any] = {"limit_mib": limit_mib, "idle_rss_mib": rss(serve.proc.pid) / MIB}
        if held:
            t0 = time.monotonic()
            out["held_statuses"] = send_held(serve.http, held, 64 * 1024)
            out["held_seconds"] = round(time.monotonic() - t0, 1)
            out["held_peak_rss_mib"] = rss(serve.proc.pid, "VmHWM") / MIB
        if uploads:
            t0 = time.monotonic()
            out["upload_statuses"] = send_uploads(serve.http, uploads, upload_mib, attempts)
            out["upload_seconds"] = round(time.monotonic() - t0, 1)
        out["peak_rss_mib"] = rss(serve.proc.pid, "VmHWM") / MIB
        time.sleep(2.0)
        out["after_burst_rss_mib"] = rss(serve.proc.pid) / MIB
        m = scrape(serve.metrics)
        if settle:  # every held trace played by its idle timeout: what the allocator keeps
            time.sleep(idle_s + 3)
            out["settled_rss_mib"] = rss(serve.proc.pid) / MIB
            out["settled_budget_bytes"] = sum(v for k, v in scrape(serve.metrics).items()
                                              if k.startswith("agenteval_receiver_memory_bytes"))
        out["memory_limited_requests"] = m.get('agenteval_receiver_requests_total{protocol="http",result="memory_limited"}', 0)
        out["traces_played_for_memory"] = m.get('agenteval_receiver_traces_total{reason="memory"}', 0)
        out["accepted_spans"] = m.get('agenteval_receiver_spans_total{protocol="http",result="accepted"}', 0)
        out["bound_mib"] = limit_mib + out["idle_rss_mib"] + 150
        out["within_bound"] = out["peak_rss_mib"] <= out["bound_mib"]
        return out
    finally:
        serve.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit-mib", type=int, default=256)
    ap.add_argument("--held", type=int, default=40_000, help="64 KiB spans held (no root); 0 to skip")
    ap.add_argument("--uploads", type=int, default=100, help="concurrent uploads; 0 to skip")
    ap.add_argument("--upload-mib", type=float, default=15)
    ap.add_argument("--attempts", type=int, default=3, help="tries per upload (429 is retried after Retry-After)")
    ap.add_argument("--idle-timeout", type=float, default=60, help="serve's --idle-timeout (held traces play after it)")
    ap.add_argument("--no-settle", action="store_true", help="skip waiting out the idle timeout for the settled RSS")
    a = ap.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    print(json.dumps(run(a.limit_mib, a.held, a.uploads, a.upload_mib, a.attempts, a.idle_timeout,
                         not a.no_settle), indent=1))


if __name__ == "__main__":
    main()
