"""The HTML report opens with its verdict as a banner (the word, the exit code, the gate), before
anything else on the page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from otel_agenteval.cli.main import main

CASES = Path(__file__).resolve().parent.parent / "examples" / "scoring" / "demo-cases.yaml"


def test_the_report_opens_with_a_verdict_banner(tmp_path: Path, capsys: Any) -> None:
    runs, report = tmp_path / "runs.jsonl", tmp_path / "report.html"
    assert main(["demo", "--runs", "40", "--no-serve", "--quiet", "--traces-out", str(runs)]) == 0
    code = main(["score", str(runs), "--cases", str(CASES), "--format", "html", "--output", str(report), "--quiet"])
    capsys.readouterr()
    page = report.read_text()
    banner = re.search(r'<div id="verdict" class="(\w+)"><div class="word \1">([^<]+)</div><p id="gate">', page)
    assert banner is not None
    assert (banner.group(1), banner.group(2)) == (("fail", "FAILED · exit 1") if code == 1 else ("pass", "PASSED · exit 0"))
    body = page[page.index("<body>"):]
    assert body.index('id="verdict"') < body.index("<h2")  # before the sets, cases and runs
    assert "#verdict{border:2px solid" in page
