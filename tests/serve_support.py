"""Helpers for the ``serve`` tests: one scenario that fires every rule, scraping, processes.

The scenario runs through a ``conftest.Harness`` (real SDK, the in-process processor attached);
its spans also go wherever else the harness's provider sends them (an ``OTLPSpanExporter`` to a
``serve``), so one workload is checked by both paths.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import trace
from prometheus_client.parser import text_string_to_metric_families

ALL_RULES = {"duplicate_write", "write_retried_after_error", "budget_breach", "write_without_confirmation",
             "unauthorized_action", "scope_violation", "ordering_violation", "conditional_forbidden",
             "ungrounded_argument"}

ALL_RULES_POLICY = """\
version: 1
tools:
  create_claim: {write: true}
  issue_refund: {write: true, requires_confirmation: true, confirm_arguments: [amount], grounded: [order_id]}
  close_account: {destructive: true}
  route: {requires_before: [coverage_rules, fraud_flags]}
  policy_lookup:
    forbidden_if: [{same_subject: {argument: policy_id, attribute: app.caller.policy_id}}]
    arguments: {policy_id: [id]}
agents:
  "*": {budget: {max_steps: 6, max_tokens: 50000}}
  restricted: {allowed_tools: [lookup_order]}
pricing:
  gpt-4o: {input_per_mtok: 2.50, output_per_mtok: 10.00}
outcome:
  success_when: [create_claim]
"""


def _messages(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"role": r, "parts": [{"type": "text", "content": c}]} for r, c in pairs])


def record_all_rules(h: Any, at: float = 0.0, conv: str = "c1", across_traces: bool = True) -> int:
    """Runs that fire every rule of :data:`ALL_RULES_POLICY`, plus span shapes a receiver must
    carry (tokens, errors with events, typed attributes, a remote parent, a trace without agent
    activity). Returns the number of traces made. ``across_traces=False``: the duplicate write
    happens within one run, so no check needs another trace (sharding by trace id)."""
    from conftest import ns
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    claim = {"order_id": "88120", "reason": "damaged"}
    # 1. a failed write retried with the same arguments: write_retried_after_error
    root = h.agent("support", at, conv=conv)
    h.chat(root, at=at + 0.5, inp=1200, out=80)
    h.tool(root, "lookup_order", {"order_id": "88120"}, at=at + 1, result='{"status": "delivered"}',
           end_attrs={"x.list": ["a", "b"], "x.int": 3, "x.float": 1.5, "x.bool": True})
    span = h.start("execute_tool create_claim", root, at + 2, {"gen_ai.operation.name": "execute_tool",
                                                                "gen_ai.tool.name": "create_claim",
                                                                "gen_ai.tool.call.arguments": json.dumps(claim)})
    h.end(span, at + 2.2, events=[("exception", {"exception.type": "shop.ClaimError", "exception.message": "boom"})],
          error="ClaimError: boom")
    h.tool(root, "create_claim", claim, at=at + 3, conv=conv)
    h.end(root, at + 4)
    # 2. the same write in a later run of the conversation (or in the same run): duplicate_write
    if across_traces:
        h.run("support", [("create_claim", claim)], at=at + 10, conv=conv)
    else:
        h.run("support", [("create_claim", claim), ("create_claim", claim)], at=at + 10, conv=conv + "-2")
    # 3. seven steps, six allowed: budget_breach
    h.run("support", [("lookup_order", {"order_id": str(i)}) for i in range(7)], at=at + 20)
    # 4. a refund the customer agreed to for another amount: write_without_confirmation
    root = h.agent("support", at + 30, conv=conv + "-refund")
    h.chat(root, at=at + 31, inp=300, out=20, end_attrs={"gen_ai.input.messages": _messages(
        ("assistant", "I can refund $45.00 for order 88120. Go ahead?"), ("user", "Yes please, order 88120"))})
    h.tool(root, "issue_refund", {"order_id": "88120", "amount": 120}, at=at + 32, conv=conv + "-refund")
    h.end(root, at + 33)
    # 5. a destructive tool, unconfirmed: unauthorized_action
    h.run("support", [("close_account", {"account": "A-1"})], at=at + 40)
    # 6. a tool outside the agent's allowed tools: scope_violation
    h.run("restricted", [("search_orders", {"query": "1"})], at=at + 50)
    # 7. route before coverage_rules succeeded: ordering_violation
    h.run("intake", [("fraud_flags", {"claim_id": "C-1"}), ("route", {"claim_id": "C-1", "queue": "water"})],
          at=at + 60)
    # 8. a lookup on another subject than the caller's: conditional_forbidden
    root = h.agent("intake", at + 70, **{"app.caller.policy_id": "POL-123"})
    h.tool(root, "policy_lookup", {"policy_id": "123"}, at=at + 71)
    h.tool(root, "policy_lookup", {"policy_id": "POL-999"}, at=at + 72)
    h.end(root, at + 73)
    # 9. a refund of an order nobody mentioned (and with no confirmation): ungrounded_argument
    root = h.agent("support", at + 80)
    h.chat(root, at=at + 81, end_attrs={"gen_ai.input.messages": _messages(("user", "Please refund my last order"))})
    h.tool(root, "issue_refund", {"order_id": "55555", "amount": 10}, at=at + 82)
    h.end(root, at + 83)
    # 10. an agent under a server span whose parent is in a service that exports nothing
    remote = SpanContext(trace_id=0x5EED + int(at), span_id=0xCAFE, is_remote=True, trace_flags=TraceFlags(1))
    server = h.tracer.start_span("POST /chat", context=trace.set_span_in_context(trace.NonRecordingSpan(remote)),
                                 kind=SpanKind.SERVER, start_time=ns(at + 90))
    h.run("triage", [("get_policy", {"topic": "damaged_delivery"})], at=at + 90.1, parent=server, step=0.2)
    server.end(end_time=ns(at + 91))
    # 11. a trace with no agent activity
    h.end(h.start("GET /health", None, at + 95), at + 95.1)
    return 11


# --- processes, ports, scraping ------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, headers: dict[str, str] | None = None, timeout: float = 10) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def samples(text: str, prefix: str = "agenteval_") -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition, keyed by (name, labels); ``_created`` series left out."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith(prefix) and not s.name.endswith("_created"):
                out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def scrape(port: int, headers: dict[str, str] | None = None) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    status, body = get(f"http://127.0.0.1:{port}/metrics", headers)
    assert status == 200, body[:300]
    return samples(body.decode())


def value(s: dict[Any, float], name: str, **labels: str) -> float:
    return s.get((name, frozenset(labels.items())), 0.0)


def total(s: dict[Any, float], name: str, **labels: str) -> float:
    """Sum of a series over the labels not given (Prometheus ``sum by``)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in s.items() if n == name and want <= ls)


def wait_until(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def settled(port: int, traces: int, headers: dict[str, str] | None = None) -> Callable[[], bool]:
    """True once ``traces`` traces were played and nothing is queued or held."""
    def check() -> bool:
        s = scrape(port, headers)
        return (total(s, "agenteval_receiver_traces_total") >= traces and value(s, "agenteval_receiver_queue_spans") == 0
                and value(s, "agenteval_receiver_held_spans") == 0)
    return check


@contextlib.contextmanager
def serve_process(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """``otel-agenteval serve`` in a child process on free ports; yields (process, its 'listening' line)."""
    cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--grpc-port", "0", "--http-port", "0",
           "--metrics-port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"serve did not start: {proc.stderr.read() if proc.stderr else ''}")
        yield proc, json.loads(line)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


# --- the loadbalancing exporter's split -----------------------------------------------------------
class HashRing:
    """The Collector ``loadbalancing`` exporter's consistent hash ring (``consistent_hashing.go``):
    100 positions per endpoint at ``crc32(endpoint + byte(i)) % 36000`` (first come keeps a taken
    position), a trace at ``crc32(trace id bytes) % 36000``, served by the next position clockwise."""

    def __init__(self, endpoints: list[str]) -> None:
        import zlib

        taken: dict[int, str] = {}
        for e in endpoints:
            for i in range(100):
                pos = zlib.crc32(e.encode() + bytes([i])) % 36000
                taken.setdefault(pos, e)
        self._items = sorted(taken.items())
        self._positions = [p for p, _ in self._items]

    def endpoint_for(self, trace_id: int) -> str:
        import bisect
        import zlib

        pos = zlib.crc32(trace_id.to_bytes(16, "big")) % 36000
        i = bisect.bisect_left(self._positions, pos)
        return self._items[i if i < len(self._items) else 0][1]


# --- a rule that holds the engine (backpressure tests) ----------------------------------------------
GATE = threading.Event()
GATE.set()


def gate_rule(event: Any, check: Any) -> None:
    """Custom rule (``custom_rules: ["serve_support:gate_rule"]``): waits while :data:`GATE` is
    clear, the way a slow rule or an overloaded host stalls the engine."""
    GATE.wait(60)


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
