"""Quick start: a traced agent files the same claim twice, and with no policy the duplicate is found.

``create_claim`` starts with a write verb, so with no policy it is an inferred write: its second
identical call is a ``duplicate_write`` (severity ``warning`` until a policy declares it a write).
The violation is logged as it is found; then ``/metrics`` is served until Ctrl-C (or ``--seconds``).

    python examples/quickstart/main.py &
    curl -s --retry 10 --retry-connrefused --retry-delay 1 http://127.0.0.1:9464/metrics | grep 'violations_total{.*duplicate_write.*create_claim'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

from opentelemetry.sdk.trace import TracerProvider

from otel_agenteval import TrajectoryProcessor
from otel_agenteval.metrics.exposition import serve

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--port", type=int, default=9464, help="/metrics port on 127.0.0.1 (default 9464)")
parser.add_argument("--seconds", type=float, default=600, help="serve /metrics this long, then exit (default 600)")
args = parser.parse_args()

provider = TracerProvider()
provider.add_span_processor(TrajectoryProcessor())  # no policy: writes inferred from tool names
tracer = provider.get_tracer("quickstart")


def call_tool(name: str, arguments: dict) -> None:
    """A tool call as the OpenTelemetry GenAI conventions trace it (your framework does this for you)."""
    with tracer.start_as_current_span(f"execute_tool {name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(arguments)}):
        pass  # the tool's work


with tracer.start_as_current_span("invoke_agent support", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
    call_tool("lookup_order", {"order_id": "88120"})
    call_tool("lookup_order", {"order_id": "88120"})  # a repeated read: no finding
    call_tool("create_claim", {"order_id": "88120", "reason": "damaged"})
    call_tool("create_claim", {"reason": "damaged", "order_id": "88120"})  # the model filed it again

try:
    server = serve(args.port)
except OSError as exc:  # the port is taken (an earlier run still going?): say so, no traceback
    raise SystemExit(f"quickstart: cannot serve /metrics on 127.0.0.1:{args.port}: {exc.strerror or exc} "
                     "(stop the other process, or pass --port)") from None
print(f"metrics on {server.url}; Ctrl-C to stop", flush=True)
with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop quietly
    time.sleep(args.seconds)
