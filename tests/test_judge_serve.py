"""``otel-agenteval serve`` with a judge section: it says what it sends, and judges the runs the
processor and replay judge (by trace id), counted on its /metrics."""

from __future__ import annotations

import json
from pathlib import Path

from judge_support import fake_judge, judge_policy
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_support import post, scrape, serve_process, value, wait_until
from test_judge import _live, _runs

from otel_agenteval import Policy
from otel_agenteval.judging.sampling import sample_point


def test_serve_judges_the_same_share_and_says_what_it_sends(tmp_path: Path) -> None:
    with fake_judge() as fake:
        provider, _, _ = _live(Policy())
        spans = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        ids = _runs(provider, 300)
        provider.shutdown()
        expected = sum(sample_point(i) < 0.1 for i in ids)
        policy = tmp_path / "policy.json"
        policy.write_text(judge_policy(fake.url))
        with serve_process("--policy", str(policy), "--grace", "0.05") as (proc, listening):
            assert proc.stderr is not None
            lines = [json.loads(proc.stderr.readline()) for _ in range(2)]
            [said] = [line for line in lines if line.get("event") == "judge"]
            assert said["rate"] == 0.1 and said["dimensions"] == ["helpfulness"]
            assert "steps[].argument_names" in said["fields_sent"] and "steps[].arguments" not in said["fields_sent"]
            recorded = spans.get_finished_spans()
            for i in range(0, len(recorded), 300):
                status, _, _ = post(f"http://127.0.0.1:{listening['http_port']}/v1/traces",
                                    encode_spans(recorded[i:i + 300]).SerializeToString(),
                                    {"Content-Type": "application/x-protobuf"})
                assert status == 200
            port = listening["metrics_port"]
            wait_until(lambda: value(scrape(port), "agenteval_judge_judged_total", dimension="helpfulness",
                                     label="pass") == expected, what="every sampled run judged")
            s = scrape(port)
            assert value(s, "agenteval_judge_sampled_total", reason="sampled") == expected
            assert value(s, "agenteval_judge_score_count", dimension="helpfulness") == expected
        assert len(fake.requests) == expected
