"""A small run of ``benchmarks/fuzz_spans.py`` (the benchmark does >=100,000 spans): hostile spans
through the real SDK never reach the app, every caught error is counted, ``/metrics`` scrapes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _fuzz_module() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("fuzz_spans", BENCH / "fuzz_spans.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize("seed", [7, 8])
def test_fuzzed_spans_never_escape_and_every_error_is_counted(seed: int) -> None:
    fuzz = _fuzz_module()
    report = fuzz.fuzz(spans=2_000, seed=seed)
    assert fuzz.verdict(report) == []
    assert report["escapes"] == 0 and report["spans"] >= 2_000
    assert report["raw_registry_encodes"] == {"text": "ok", "openmetrics": "ok"}
    assert report["scrape"]["samples"] > 0
    assert "duplicate_write" in report["clean_run_rules"]
