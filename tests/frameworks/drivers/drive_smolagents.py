"""smolagents ToolCallingAgent + openinference-instrumentation-smolagents, offline:
``python drive_smolagents.py MODE OUT_DIR`` (one mode: ``openinference``).

The model is smolagents' own ``OpenAIServerModel`` against a scripted OpenAI-compatible server
on 127.0.0.1, so the instrumented model class runs as in production. A ToolCallingAgent ends its
run with its ``final_answer`` tool: the scripted last turn is that call, which is the answer, not
a tool step.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODE, OUT = sys.argv[1], Path(sys.argv[2])

import scenario as sc  # noqa: E402

TURN = {"n": 0}


class ScriptedOpenAI(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        n = TURN["n"]
        TURN["n"] += 1
        name, args = sc.TURNS[n] if n < len(sc.TURNS) else ("final_answer", {"answer": sc.FINAL_TEXT})
        inp, out = sc.usage_of(n)
        body = json.dumps({
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": sc.MODEL,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": f"call_{n}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}}],
            "usage": {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedOpenAI)
threading.Thread(target=server.serve_forever, daemon=True).start()
run = sc.Run()
from openinference.instrumentation.smolagents import SmolagentsInstrumentor  # noqa: E402

SmolagentsInstrumentor().instrument(tracer_provider=run.provider)

from smolagents import OpenAIServerModel, ToolCallingAgent, tool  # noqa: E402


@tool
def lookup_order(order_id: str) -> dict:
    """Look up an order by its id.

    Args:
        order_id: The order id.
    """
    return sc.lookup_order(order_id)


@tool
def get_policy(topic: str) -> str:
    """Get the support policy text for a topic.

    Args:
        topic: The policy topic.
    """
    return sc.get_policy(topic)


@tool
def create_claim(order_id: str, reason: str) -> dict:
    """Create a damage claim for an order.

    Args:
        order_id: The order id.
        reason: Why the claim is made.
    """
    return sc.create_claim(order_id, reason)


def scenario() -> None:
    model = OpenAIServerModel(model_id=sc.MODEL, api_base=f"http://127.0.0.1:{server.server_port}/v1", api_key="x")
    agent = ToolCallingAgent(tools=[lookup_order, get_policy, create_claim], model=model, name=sc.AGENT,
                             description="Order claims support agent.", verbosity_level=0, max_steps=10)
    try:
        assert agent.run(sc.USER_MESSAGE) == sc.FINAL_TEXT
    finally:
        server.shutdown()


sc.drive(run, scenario, OUT)
