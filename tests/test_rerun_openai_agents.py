"""``rerun`` with an OpenAI Agents SDK agent: recorded live under OpenInference's instrumentor (the
real Responses model, its HTTP call scripted), rerun unedited through ``for_openai_agents``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("agents")
pytest.importorskip("openinference.instrumentation.openai_agents")

from agents import Runner  # noqa: E402
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from rerun_fixtures import agents_support, support  # noqa: E402

from otel_agenteval.cli.main import main  # noqa: E402
from otel_agenteval.replay.write import OTLPJsonLinesExporter  # noqa: E402

RUNS = 20


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rerun_oa")
    (d / "policy.yaml").write_text(yaml.safe_dump(support.POLICY))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPJsonLinesExporter(d / "live.jsonl")))
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        for i in range(RUNS):
            Runner.run_sync(agents_support.build(), f"Please refund {i % 7 + 1}.5 for order {1000 + i}.")
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    return d


def _rerun(d: Path, agent: str, code: int = 0) -> dict[str, object]:
    support.CALLS.clear()
    assert main(["rerun", str(d / "live.jsonl"), "--agent", f"rerun_fixtures.agents_support:{agent}",
                 "--policy", str(d / "policy.yaml"), "--format", "json", "-o", str(d / "out.json")]) == code
    assert support.CALLS == [], "a tool really ran during the rerun"
    return json.loads((d / "out.json").read_text())  # type: ignore[no-any-return]


def test_the_unchanged_agent_keeps_every_path(recorded: Path) -> None:
    doc = _rerun(recorded, "baseline")
    assert doc["summary"]["counts"]["identical"] == RUNS  # type: ignore[index]


def test_the_candidate_without_the_check_diverges_at_step_2(recorded: Path) -> None:
    doc = _rerun(recorded, "skip_check", code=1)  # the write it tried unconfirmed: critical, as live
    assert doc["summary"]["divergence_steps"] == {"2": RUNS}  # type: ignore[index]
    assert doc["summary"]["violations_new"] == {"write_without_confirmation": RUNS}  # type: ignore[index]
    d = doc["conversations"][0]["divergence"]  # type: ignore[index]
    assert (d["recorded"]["tool"], d["new"]["tool"]) == ("ask_user_confirmation", "issue_refund")
