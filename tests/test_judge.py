"""The sampled judge (issue 43): the same runs judged in the processor, in serve and in replay,
results where findings go, never in the way of a span or a request, and no trust without measurement."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from judge_support import SCORES, fake_judge, judge_policy
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from prometheus_client import CollectorRegistry
from serve_support import post, wait_until
from trace_files import otlp_json_lines

from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.cli.main import main
from otel_agenteval.judging.sampling import sample_point

RUNS = 2000


class SeededIds(IdGenerator):
    """Trace ids from a seeded generator: the sample (by trace id) is the same on every test run."""

    def __init__(self, seed: int = 43) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


def _live(policy: Policy, **kwargs: Any) -> tuple[TracerProvider, TrajectoryProcessor, CollectorRegistry]:
    registry = CollectorRegistry()
    processor = TrajectoryProcessor(policy, registry=registry, **kwargs)
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}), id_generator=SeededIds())
    provider.add_span_processor(processor)
    return provider, processor, registry


def _runs(provider: TracerProvider, n: int, agent: str = "support", args: Any = None) -> list[str]:
    """``n`` runs of one agent, each one tool call; their trace ids."""
    tracer = provider.get_tracer("tests")
    ids = []
    for i in range(n):
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}) as root:
            ids.append(format(root.get_span_context().trace_id, "032x"))
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": json.dumps(args if args is not None else {"order": i})}):
                pass
    return ids


def test_one_run_in_ten_is_judged_the_same_runs_in_the_processor_serve_and_replay(
        tmp_path: Path, started_receivers: Any) -> None:
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    with fake_judge() as fake:
        policy = Policy.from_yaml(judge_policy(fake.url))
        judged: list[Any] = []
        provider, processor, registry = _live(policy, on_judgement=[judged.append], logger_provider=logger_provider)
        spans = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        ids = _runs(provider, RUNS)
        assert processor.judging is not None and processor.judging.queue.drain(30)
        expected = sorted(i for i in ids if sample_point(i) < 0.1)
        assert 0.08 * RUNS <= len(expected) <= 0.12 * RUNS
        assert sorted(j.trace_id for j in judged) == expected
        # series exact
        n = len(expected)
        value = registry.get_sample_value
        assert value("agenteval_judge_sampled_total", {"reason": "sampled"}) == n
        assert value("agenteval_judge_judged_total", {"dimension": "helpfulness", "label": "pass"}) == n
        assert value("agenteval_judge_score_count", {"dimension": "helpfulness"}) == n
        assert value("agenteval_judge_score_sum", {"dimension": "helpfulness"}) == pytest.approx(n * SCORES["support"])
        assert value("agenteval_judge_dropped_total", {"reason": "queue_full"}) == 0
        # events exact: one gen_ai.evaluation.result per judgement, on the run's root span
        records = [r.log_record for r in logs.get_finished_logs()]
        roots = {format(s.context.trace_id, "032x"): s.context.span_id for s in spans.get_finished_spans()
                 if s.parent is None}
        assert sorted((format(r.trace_id, "032x"), r.span_id) for r in records) == [(t, roots[t]) for t in expected]
        assert {json.dumps(dict(r.attributes), sort_keys=True) for r in records} == {json.dumps({
            "gen_ai.evaluation.name": "helpfulness", "gen_ai.evaluation.score.value": 0.75,
            "gen_ai.evaluation.score.label": "pass", "gen_ai.evaluation.explanation": "support made 1 tool calls",
            "gen_ai.agent.name": "support", "agenteval.judge.trusted": False, "agenteval.judge.reason": "sampled",
            "agenteval.judge.verdict": "pass"}, sort_keys=True)}
        provider.shutdown()
        recorded = spans.get_finished_spans()

        # replay --judge: the same runs, offline
        trace_file = otlp_json_lines(recorded, tmp_path / "traces.jsonl", batch=200)
        policy_file = tmp_path / "policy.json"
        policy_file.write_text(judge_policy(fake.url))
        out = tmp_path / "judgements.jsonl"
        assert main(["replay", str(trace_file), "--policy", str(policy_file), "--judge", "--judgements", str(out),
                     "-q", "--format", "json"]) == 0
        offline = [json.loads(line) for line in out.read_text().splitlines()]
        assert [j["trace_id"] for j in offline] == expected

        # serve: the same runs, through the judge's workers the command wires
        from otel_agenteval.cli.serve import judging_for_serve
        from otel_agenteval.judging.sink import JudgeSink
        from otel_agenteval.receiver import Receiver, ServeConfig

        registry, judging = judging_for_serve(policy, None)
        assert isinstance(judging, JudgeSink)
        in_serve: list[Any] = []
        judging._on_judgement = (in_serve.append,)
        cfg = ServeConfig(grpc_port=-1, http_port=0, metrics_port=0, grace_s=0.05, idle_s=1.0, log_violations=False)
        with Receiver(cfg, policy, registry=registry, on_violation=(judging.violation,),
                      on_trajectory=(judging.finished,)) as receiver:
            _post_all(receiver.ports.http, recorded)
            wait_until(lambda: registry.get_sample_value("agenteval_judge_sampled_total", {"reason": "sampled"}) == n)
            assert judging.queue.drain(30)
        judging.close()
        assert sorted(j.trace_id for j in in_serve) == expected


def _post_all(port: int, spans: Any, batch: int = 500) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    for i in range(0, len(spans), batch):
        status, _, _ = post(f"http://127.0.0.1:{port}/v1/traces", encode_spans(spans[i:i + batch]).SerializeToString(),
                            {"Content-Type": "application/x-protobuf"})
        assert status == 200


@pytest.mark.parametrize("mode", ["sleep", "500"])
def test_a_slow_or_failing_judge_never_holds_up_a_span_and_is_counted(mode: str) -> None:
    with fake_judge() as fake:
        fake.mode = mode
        policy = Policy.from_yaml(judge_policy(fake.url, rate=1.0, timeout_s=0.2, retries=1, backoff_s=0.05,
                                               concurrency=2).replace('"queue_size": 5000', '"queue_size": 4'))
        provider, processor, registry = _live(policy)
        started = time.perf_counter()
        _runs(provider, 200)
        took = time.perf_counter() - started
        # judging all 200 would take 200 x 2 tries x 0.2 s / 2 threads = 40 s; the spans took none of it
        assert took < 2.0, took
        value = registry.get_sample_value
        assert value("agenteval_judge_sampled_total", {"reason": "sampled"}) == 200
        assert value("agenteval_judge_dropped_total", {"reason": "queue_full"}) >= 150
        counted = ("agenteval_judge_timeouts_total", {"dimension": "helpfulness"}) if mode == "sleep" else (
            "agenteval_judge_errors_total", {"dimension": "helpfulness", "reason": "http_5xx"})
        wait_until(lambda: (value(*counted) or 0) >= 2, timeout=10)
        assert value("agenteval_judge_judged_total", {"dimension": "helpfulness", "label": "pass"}) == 0
        provider.shutdown()  # the judge's threads stop; what is still queued is counted dropped
        sampled = value("agenteval_judge_sampled_total", {"reason": "sampled"})
        failed = value(*counted) or 0
        dropped = sum(value("agenteval_judge_dropped_total", {"reason": r}) or 0 for r in ("queue_full", "shutdown"))
        assert failed + dropped <= sampled and failed + dropped >= sampled - 2  # at most the two in flight


def test_nothing_is_sent_but_the_runs_shape_unless_content_is_opted_in(tmp_path: Path) -> None:
    with fake_judge() as fake:
        for content in (False, True):
            fake.requests.clear()
            doc = json.loads(judge_policy(fake.url, rate=1.0))
            doc["judge"]["content"] = content
            provider, processor, _ = _live(Policy.from_dict(doc))
            _runs(provider, 1, args={"card_number": "4111-1111-1111-1111"})
            assert processor.judging is not None and processor.judging.queue.drain(10)
            [request] = fake.requests
            sent = request["messages"][1]["content"]
            assert ("4111-1111-1111-1111" in sent) is content
            assert "card_number" in sent  # argument names are the run's shape
            assert set(processor.judging.fields_sent or ()) >= {"steps[].argument_names"}
            assert ("steps[].arguments" in (processor.judging.fields_sent or ())) is content
            provider.shutdown()


def test_a_judge_adds_no_violation_and_a_flagged_run_is_always_judged(tmp_path: Path) -> None:
    with fake_judge() as fake:
        doc = json.loads(judge_policy(fake.url, rate=0.0))
        doc["judge"]["include_flagged"] = True
        doc["tools"] = {"issue_refund": {"write": True, "requires_confirmation": True}}
        found: list[Any] = []
        judged: list[Any] = []
        provider, processor, _ = _live(Policy.from_dict(doc), on_violation=[found.append], on_judgement=[judged.append])
        tracer = provider.get_tracer("tests")
        with tracer.start_as_current_span("invoke_agent billing", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}), \
                tracer.start_as_current_span("execute_tool issue_refund", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "issue_refund"}):
            pass
        _runs(provider, 20)  # rate 0: none of these
        assert processor.judging is not None and processor.judging.queue.drain(10)
        assert [v.rule for v in found] == ["write_without_confirmation"]
        assert [(j.agent, j.reason, j.verdict, j.label, j.score) for j in judged] == [
            ("billing", "flagged", "fail", "fail", SCORES["billing"])]
        provider.shutdown()


def test_a_callable_judge_and_its_errors(tmp_path: Path) -> None:
    from otel_agenteval.judging import JudgeResult

    def judge(t: Any) -> JudgeResult:
        if t.tool_calls > 1:
            raise RuntimeError("the user's judge broke")
        return JudgeResult("helpfulness", 1.0, "pass", "fine")

    doc = json.loads(judge_policy("http://127.0.0.1:9/v1", rate=1.0))
    del doc["judge"]["endpoint"]
    got: list[Any] = []
    provider, processor, registry = _live(Policy.from_dict(doc), judge=judge, on_judgement=[got.append])
    _runs(provider, 3)
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}):
                pass
    assert processor.judging is not None and processor.judging.queue.drain(10)
    assert [j.score for j in got] == [1.0, 1.0, 1.0]
    assert registry.get_sample_value("agenteval_judge_errors_total", {"dimension": "helpfulness", "reason": "raised"}) == 1
    provider.shutdown()


def test_a_forked_child_judges_its_own_runs() -> None:
    import os

    from conftest import child_exit_code

    from otel_agenteval.judging import JudgeResult

    doc = json.loads(judge_policy("http://127.0.0.1:9/v1", rate=1.0))
    del doc["judge"]["endpoint"]
    got: list[Any] = []
    provider, processor, _ = _live(Policy.from_dict(doc), judge=lambda t: JudgeResult("helpfulness", 1.0),
                                   on_judgement=[got.append])
    pid = os.fork()
    if pid == 0:  # the child: its own threads take its runs
        try:
            _runs(provider, 3)
            ok = processor.judging is not None and processor.judging.queue.drain(10) and len(got) == 3
            os._exit(0 if ok else 1)
        except BaseException:  # noqa: BLE001 (the child must exit, whatever happened)
            os._exit(2)
    assert child_exit_code(pid, "the child's judge never judged") == 0
    provider.shutdown()


def test_per_agent_rates_and_the_same_sample_at_a_higher_rate() -> None:
    from otel_agenteval.judging import JudgeResult

    def judge(t: Any) -> JudgeResult:
        return JudgeResult("helpfulness", 1.0)

    def judged_ids(rate: float, agents: dict[str, float]) -> tuple[set[str], set[str]]:
        doc = json.loads(judge_policy("http://127.0.0.1:9/v1", rate=rate))
        del doc["judge"]["endpoint"]
        doc["judge"]["agents"] = agents
        got: list[Any] = []
        provider, processor, _ = _live(Policy.from_dict(doc), judge=judge, on_judgement=[got.append])
        support, billing = _runs(provider, 200, "support"), _runs(provider, 200, "billing")
        assert processor.judging is not None and processor.judging.queue.drain(10)
        provider.shutdown()
        ids = {j.trace_id for j in got}
        return ids & set(support), ids & set(billing)

    support, billing = judged_ids(0.0, {"billing": 1.0})
    assert (len(support), len(billing)) == (0, 200)
    low, _ = judged_ids(0.1, {"billing": 0.0})
    high, none = judged_ids(0.3, {"billing": 0.0})  # the same seeded trace ids: a sample grows, never reshuffles
    assert none == set() and low < high and 0 < len(low) < len(high) < 200
