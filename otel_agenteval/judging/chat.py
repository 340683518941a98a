"""An OpenAI-compatible chat completions endpoint as a judge, with the standard library only.

One request per dimension: the dimension's rubric and labels as the system message, the run
rendered by :mod:`.render` as the user message, ``temperature: 0`` and a JSON answer
``{"score": 0..1, "label": "...", "explanation": "..."}`` asked for. A request that times out,
fails to connect, or gets a 429 or 5xx is retried ``retries`` times with exponential backoff;
then it raises :class:`~.result.JudgeTimeout` or :class:`~.result.JudgeError` (counted by the
sink). An answer outside [0, 1] or with a label the dimension does not list is refused, not
guessed at. The key is read from the environment variable the policy names, never from the policy.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.judge_section import Dimension, Endpoint, JudgePolicy
from .render import fields_sent, render_text
from .result import JudgeError, JudgeResult, JudgeTimeout

SYSTEM = ("You are an evaluator of AI agent runs. Judge the run below on one dimension only.\n"
          "Dimension: {name}\nRubric: {rubric}\n"
          "Answer with a JSON object and nothing else: {{\"score\": a number from 0 (worst) to 1 (best), "
          "\"label\": one of {labels}, \"explanation\": one or two sentences}}.")
RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504})


class ChatJudge:
    """``ChatJudge(policy.judge)``: judges a run on every dimension of the section, one request each."""

    def __init__(self, section: JudgePolicy, *, stop: threading.Event | None = None) -> None:
        if section.endpoint is None:
            raise ValueError("judge.endpoint: not set")
        self.endpoint: Endpoint = section.endpoint
        self.dimensions = dict(section.dimensions)
        self.content = section.content
        self.fields_sent = fields_sent(section.content)  # what leaves the process, by field
        self._stop = stop if stop is not None else threading.Event()  # set: no more backoff waits
        self._url = self.endpoint.base_url + "/chat/completions"
        key = os.environ.get(self.endpoint.api_key_env, "") if self.endpoint.api_key_env else ""
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}

    def render(self, t: Trajectory, findings: Sequence[Violation]) -> str:
        """The run as sent (the user message), rendered once for all dimensions."""
        return render_text(t, findings, self.content, self.endpoint.max_chars)

    def __call__(self, t: Trajectory) -> list[JudgeResult]:
        """Every dimension (the first that fails raises): the built-in judge as a plain callable."""
        run = self.render(t, ())
        return [self.dimension(name, d, run) for name, d in self.dimensions.items()]

    def dimension(self, name: str, d: Dimension, run: str) -> JudgeResult:
        body = json.dumps({
            "model": self.endpoint.model, "temperature": 0, "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": SYSTEM.format(name=name, rubric=d.rubric,
                                                                     labels=json.dumps(d.labels))},
                         {"role": "user", "content": run}],
        }).encode()
        answer = self._post(body)
        return parse_answer(name, d, answer)

    def _post(self, body: bytes) -> Any:
        e = self.endpoint
        last: JudgeError = JudgeError("unreachable")
        for attempt in range(e.retries + 1):
            if attempt and self._stop.wait(e.backoff_s * 2 ** (attempt - 1)):
                break  # shutting down: no more waiting
            request = urllib.request.Request(self._url, data=body, headers=self._headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=e.timeout_s) as response:  # noqa: S310 (http(s) only)
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                kind = "http_429" if exc.code == 429 else "http_5xx" if exc.code >= 500 else "http_4xx"
                last = JudgeError(kind, f"HTTP {exc.code} from {self._url}")
                if exc.code not in RETRIED:
                    raise last from None
            except TimeoutError:
                last = JudgeTimeout(f"no answer from {self._url} in {e.timeout_s}s")
            except urllib.error.URLError as exc:
                timed_out = isinstance(exc.reason, (TimeoutError, socket.timeout))
                last = JudgeTimeout(str(exc.reason)) if timed_out else JudgeError("unreachable", str(exc.reason))
            except (ValueError, OSError) as exc:  # a body that is not JSON, a connection reset
                last = JudgeError("invalid_response" if isinstance(exc, ValueError) else "unreachable", str(exc))
        raise last


def parse_answer(name: str, d: Dimension, answer: Any) -> JudgeResult:
    """The chat completion's message as a :class:`JudgeResult`, or :class:`JudgeError` ("invalid_response")."""
    try:
        content = answer["choices"][0]["message"]["content"]
        got = json.loads(content)
        score, label = got.get("score"), got.get("label")
        explanation = str(got.get("explanation", ""))[:2000]
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise JudgeError("invalid_response", "not a chat completion with a JSON object") from None
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1):
        raise JudgeError("invalid_response", f"score {score!r} is not a number from 0 to 1")
    if label is not None and label not in d.labels:
        raise JudgeError("invalid_response", f"label {label!r} is not one of {d.labels}")
    if score is None and label is None:
        raise JudgeError("invalid_response", "neither a score nor a label")
    return JudgeResult(name, None if score is None else float(score), label, explanation)
