"""``otel-agenteval init --from TRACES``: a starter policy from recorded runs (issue 26, item 3)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trace_files as tf
from conftest import ISSUE_POLICY

from otel_agenteval import Policy
from otel_agenteval.cli.main import main


@pytest.fixture(scope="module")
def demo_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("init") / "runs.jsonl.gz"
    assert main(["demo", "--runs", "150", "--no-serve", "--quiet", "--traces-out", str(path)]) == 0
    return path


def test_init_writes_a_policy_check_policy_accepts(demo_traces: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "agenteval.yaml"
    assert main(["init", "--from", str(demo_traces), "-o", str(out)]) == 0
    assert f"wrote {out} from 150 runs" in capsys.readouterr().out
    assert main(["check-policy", str(out)]) == 0
    text = out.read_text()
    policy = Policy.from_file(out)
    assert (policy.is_write("create_claim"), policy.is_write("lookup_order")) == (True, False)
    assert policy.write_tools == {"create_claim", "issue_refund", "update_address"}  # declared, not inferred
    assert policy.confirmation.tools == ["ask_user_confirmation"]
    assert "create_claim" in (policy.agents["support"].allowed_tools or [])
    assert "create_claim" not in (policy.agents["returns"].allowed_tools or [])
    budget = policy.budget_for("support")
    assert budget.max_steps is not None and budget.max_tokens is not None and budget.max_cost_usd is None  # no prices
    assert "create_claim: {write: true}" in text and "inferred write" in text and "calls" in text


def test_budgets_sit_at_the_p99_with_headroom(make_processor: Any, tmp_path: Path) -> None:
    from otel_agenteval.policy.starter import Observed, budget_of

    h = make_processor()
    seen = Observed()
    for i in range(100):
        h.run("support", [("lookup_order", {"n": j}) for j in range(1 + i % 10)], at=i * 100.0)
    for t in h.trajectories:
        seen(t)
    assert seen.runs == 100
    assert budget_of(seen.agents["support"]) == {"max_steps": 15}  # p99 10 steps x1.5; no model calls seen


@pytest.mark.parametrize("fmt", ["otlp-json-document", "otlp-protobuf-varint", "sdk-json-list"])
def test_init_reads_every_format_replay_reads(fmt: str, make_processor: Any, tmp_path: Path) -> None:
    _, spans = tf.recorded(make_processor, ISSUE_POLICY)
    write, ext = tf.WRITERS[fmt]
    path = write(spans, tmp_path / f"traces{ext}")
    out = tmp_path / "p.yaml"
    assert main(["init", "--from", str(path), "-o", str(out)]) == 0
    policy = Policy.from_file(out)
    assert sorted(policy.tools) == ["create_claim", "get_policy", "lookup_order"]
    assert sorted(policy.agents) == ["*", "support", "triage"]


def test_rerun_merges_and_keeps_the_users_edits(demo_traces: Path, make_processor: Any, tmp_path: Path,
                                                capsys: Any) -> None:
    out = tmp_path / "agenteval.yaml"
    assert main(["init", "--from", str(demo_traces), "-o", str(out)]) == 0
    edited = out.read_text().replace("create_claim: {write: true}", "create_claim: {write: false}  # reviewed")
    head, _, support = edited.partition("\n  support:")
    support = re.sub(r"budget: \{max_steps: \d+", "budget: {max_steps: 5", support, count=1)
    edited = f"{head}\n  support:{support}"
    edited += "pricing:\n  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10}\n"
    out.write_text(edited)
    assert Policy.from_file(out).budget_for("support").max_steps == 5
    capsys.readouterr()
    assert main(["init", "--from", str(demo_traces), "-o", str(out)]) == 0  # the same traces: nothing new
    assert "nothing new" in capsys.readouterr().out and out.read_text() == edited
    # more traces, with a tool never seen before
    h = make_processor()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    h.run("support", [("cancel_order", {"order_id": "1"}), ("check_stock", {"sku": "A"})])
    more = tf.otlp_json_lines(list(exporter.get_finished_spans()), tmp_path / "more.jsonl")
    capsys.readouterr()
    assert main(["init", "--from", str(more), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "added tool cancel_order (write)" in printed and "previous file kept as agenteval.yaml.bak" in printed
    assert (tmp_path / "agenteval.yaml.bak").read_text() == edited
    policy = Policy.from_file(out)
    assert (policy.is_write("create_claim"), policy.is_write("cancel_order"), policy.is_write("check_stock")) == (
        False, True, False)
    assert policy.budget_for("support").max_steps == 5  # the user's value, not the traces'
    assert "issue_refund" in policy.tools and policy.price_for("gpt-4o") is not None  # kept though not seen
    assert main(["check-policy", str(out)]) == 0
    # --force starts over from these traces alone
    assert main(["init", "--from", str(more), "-o", str(out), "--force"]) == 0
    assert sorted(Policy.from_file(out).tools) == ["cancel_order", "check_stock"]


def test_input_errors_exit_2_with_one_line_naming_the_file(tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "missing.jsonl"
    assert main(["init", "--from", str(missing), "-o", str(tmp_path / "p.yaml")]) == 2
    assert capsys.readouterr().err == f"otel-agenteval init: {missing}: no such file\n"
    notes = tmp_path / "notes.md"
    notes.write_text("# not traces\n\nsome text\n")
    assert main(["init", "--from", str(notes), "-o", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"otel-agenteval init: {notes}: not trace data") and err.count("\n") == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("tools:\n  x: {wirte: true}\n")
    assert main(["init", "--from", str(notes), "-o", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"otel-agenteval init: {bad}: not merged into") and err.count("\n") == 1
    assert not (tmp_path / "p.yaml").exists() and bad.read_text() == "tools:\n  x: {wirte: true}\n"


def test_init_from_a_few_runs_sets_budgets_those_runs_keep(make_processor: Any, tmp_path: Path, capsys: Any) -> None:
    """Three runs of four, five and three steps, the first day of a new agent: the budgets written
    leave room over what the runs used (p99 = the largest of three), so replaying those very runs
    against the policy raises no budget alarm."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    h = make_processor()
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    for i, steps in enumerate((4, 5, 3)):
        root = h.agent("support", at=i * 100.0)
        for j in range(steps):
            if j % 3 == 0:
                h.chat(root, at=i * 100.0 + j + 0.5, inp=900, out=100)
            h.tool(root, "lookup_order", {"order_id": f"{i}-{j}"}, at=i * 100.0 + j + 1)
        h.end(root, i * 100.0 + 10)
    traces = tf.otlp_json_lines(list(exporter.get_finished_spans()), tmp_path / "few.jsonl")
    out = tmp_path / "agenteval.yaml"
    assert main(["init", "--from", str(traces), "-o", str(out)]) == 0
    budget = Policy.from_file(out).budget_for("support")
    # 5 steps x1.5 -> 8 (above 5 + 2); 2 model calls -> 2 + 2 = 4; 2000 tokens x1.5 -> 3000
    assert (budget.max_steps, budget.max_llm_calls, budget.max_tokens) == (8, 4, 3000)
    capsys.readouterr()
    assert main(["replay", str(traces), "--policy", str(out), "--format", "json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["violations"] == []
