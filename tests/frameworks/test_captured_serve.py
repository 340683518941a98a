"""Every captured framework's spans through ``otel-agenteval serve`` (issue 25): sent as OTLP/HTTP
protobuf, one ``service.name`` per capture, and the served metrics agree with the live processor's
run for run (the same spans played into a real ``TrajectoryProcessor``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from scenario import live, policy_for
from serve_support import post, scrape, serve_process, settled, total, wait_until
from test_captured_shapes import CASES, GATEWAYS, SPANS, play_live, sdk_span

from otel_agenteval.replay import iter_spans

POLICY = """\
version: 1
tools:
  create_claim: {write: true}
  orders-create_claim: {write: true}
outcome:
  success_when: [create_claim, orders-create_claim]
"""


def served_figures(s: dict[Any, float], service: str) -> dict[str, Any]:
    calls = {}
    for (name, labels), v in s.items():
        ls = dict(labels)
        if name == "agenteval_tool_calls_total" and ls.get("service_name") == service and v:
            calls[f"{ls['agent_name']}/{ls['tool']}/{ls['status']}"] = v
    runs = sorted((dict(ls)["agent_name"], dict(ls)["outcome"]) for (name, ls), v in s.items()
                  if name == "agenteval_trajectories_total" and dict(ls).get("service_name") == service and v)
    return {"trajectories": runs, "tool_calls": dict(sorted(calls.items())),
            "tokens": (int(total(s, "agenteval_tokens_total", service_name=service, type="input")),
                       int(total(s, "agenteval_tokens_total", service_name=service, type="output"))),
            "duplicate_write": total(s, "agenteval_violations_total", service_name=service, rule="duplicate_write")}


def test_every_capture_through_serve_agrees_with_the_live_processor(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY)
    names = sorted([*CASES, *GATEWAYS])  # round 3 too (CASES holds them)
    with serve_process("--policy", str(policy_file), "--grace", "0.3", "--fragment-linger", "0.3",
                       "--no-log-violations") as (_, info):
        port = info["http_port"]
        traces = 0
        for i, name in enumerate(names):
            resource = Resource({"service.name": f"cap-{i}"})
            spans = [sdk_span(r) for r in iter_spans([SPANS / name])]
            for s in spans:
                s._resource = resource  # one service per capture: its series apart from the others'
            traces += len({s.context.trace_id for s in spans})
            status, _, body = post(f"http://127.0.0.1:{port}/v1/traces", encode_spans(spans).SerializeToString(),
                                   {"Content-Type": "application/x-protobuf"})
            assert status == 200, body
        mport = info["metrics_port"]
        wait_until(settled(mport, traces), what="every capture played")
        s = scrape(mport)
    for i, name in enumerate(names):
        want = live(play_live(SPANS / name, policy_for(CASES.get(name, {}).get("tool_prefix", ""))))
        got = served_figures(s, f"cap-{i}")
        assert got == {"trajectories": sorted(want["trajectories"]), "tool_calls": want["tool_calls"],
                       "tokens": want["tokens"][0], "duplicate_write": want["duplicate_write"]}, name
