"""Hardening round 4 (#40), B3: ``os.fork()`` while threads end spans that log violations. The
child's first violation log never waits on a lock a parent's thread held at the fork (structlog's
write lock, renewed in the child). Run in a child interpreter, with structlog's default set-up
writing to a real pipe, as in an application (pytest's capture would stand in for stdout)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r'''
import json, os, sys, threading, time
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from otel_agenteval import Policy, TrajectoryProcessor

processor = TrajectoryProcessor(Policy.from_yaml("version: 1\ntools:\n  create_claim: {write: true}\n"),
                                registry=CollectorRegistry())
provider = TracerProvider()
provider.add_span_processor(processor)
tracer = provider.get_tracer("t")

def run(i):  # one run, one duplicate_write: one violation log line
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool create_claim", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                    "gen_ai.tool.call.arguments": json.dumps({"order_id": str(i)})}):
                pass

stop = threading.Event()
def loop():
    i = 0
    while not stop.is_set():
        run(i)
        i += 1
for _ in range(3):
    threading.Thread(target=loop, daemon=True).start()
hung = 0
for k in range(FORKS):
    time.sleep(0.005)
    pid = os.fork()
    if pid == 0:
        run(10**6 + k)
        os._exit(0)
    deadline = time.monotonic() + 2
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            hung += 1
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
stop.set()
print(f"hung {hung} of {FORKS}", file=sys.stderr, flush=True)
'''


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_forks_while_threads_log_violations_never_hang_the_child() -> None:
    repo = Path(__file__).resolve().parent.parent
    got = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", SCRIPT.replace("FORKS", "10")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert got.returncode == 0, got.stderr[-2000:]
    # the product's violation lines share stderr with the script's verdict (its threads may still write)
    verdict = re.findall(r"hung (\d+) of 10", got.stderr)
    assert verdict == ["0"], got.stderr[-2000:]
