"""A recording with a value nested past what Python can walk: rejected with its file and line,
never a bare "input nested too deeply" (or a traceback)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_agenteval.cli.main import main


def _deep_recording(path: Path, depth: int = 490) -> None:
    value = '{"stringValue":"x"}'
    for _ in range(depth):  # under the JSON parser's 1024 levels, past the recursion limit when read
        value = '{"kvlistValue":{"values":[{"key":"k","value":' + value + '}]}}'
    span = ('{"traceId":"' + "0" * 31 + '1","spanId":"' + "0" * 15 + '1","name":"execute_tool a",'
            '"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":['
            '{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},'
            '{"key":"gen_ai.tool.call.arguments","value":' + value + '}]}')
    path.write_text('{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"s"},'
                    '"spans":[' + span + ']}]}]}\n')


@pytest.mark.parametrize("command", ["replay", "score"])
def test_a_deeply_nested_recording_is_rejected_naming_its_file(command: str, tmp_path: Path, capsys: Any) -> None:
    deep = tmp_path / "deep.jsonl"
    _deep_recording(deep)
    cases = tmp_path / "cases.yaml"
    cases.write_text("cases:\n  - id: a\n    reference: {required: [{tool: a}]}\n")
    argv = [command, str(deep)] + (["--cases", str(cases)] if command == "score" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"rejected: {deep}:1: not read: a value nested too deeply" in err
    assert "internal error" not in err and "otel-agenteval replay: input nested" not in err
