"""A local OpenAI-compatible chat endpoint on loopback, answering scripted judgements (test helper).

``FakeJudge.mode``: ``"ok"`` (the script's answer), ``"sleep"`` (waits ``sleep_s`` first), ``"500"``
(an error every time). The answer for a run is read from the run it was sent: the score is
``SCORES[agent]`` and the label ``pass`` when the run has no finding, ``fail`` otherwise.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCORES = {"support": 0.75, "billing": 0.25}


class FakeJudge:
    def __init__(self) -> None:
        self.mode = "ok"
        self.sleep_s = 5.0
        self.requests: list[dict[str, Any]] = []  # every request body, parsed
        self.release = threading.Event()  # set at the end: sleeping handlers return at once
        self.url = ""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        run = json.loads(body["messages"][1]["content"])
        verdict = {"score": SCORES.get(run["agent"], 0.5), "label": "fail" if run["findings"] else "pass",
                   "explanation": f"{run['agent']} made {run['tool_calls']} tool calls"}
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(verdict)}}]}


@contextmanager
def fake_judge() -> Iterator[FakeJudge]:
    fake = FakeJudge()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append(body)
            if fake.mode == "sleep":
                fake.release.wait(fake.sleep_s)
            if fake.mode == "500":
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            out = json.dumps(fake.answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        fake.release.set()
        server.shutdown()
        server.server_close()
        time.sleep(0)


def judge_policy(url: str, rate: float = 0.1, **endpoint: Any) -> str:
    ep = {"base_url": url, "model": "judge-1", "timeout_s": 5, "retries": 0, "concurrency": 4, **endpoint}
    return json.dumps({"tools": {"issue_refund": {"write": True}},
                       "judge": {"rate": rate, "include_flagged": False, "endpoint": ep, "queue_size": 5000,
                                 "dimensions": {"helpfulness": {"rubric": "Did the agent help?"}}}})


def fixed_judge(t: Any) -> Any:
    """A callable judge (``--judge judge_support:fixed_judge``): 0.5 and "pass" for every run."""
    from otel_agenteval.judging import JudgeResult

    return JudgeResult("helpfulness", 0.5, "pass", f"{t.tool_calls} tool calls")
