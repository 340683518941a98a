"""``score --format html``: the page in a real headless Chromium (Debian's, driven by Playwright).

The page loads with no console error and no request beyond itself, its numbers are the JSON
report's, the verdict filters hide and show runs, message text appears only with
--show-arguments, and a case shows at most RUNS_PER_CASE runs, failed first.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scoring_support import WORKED_CASES, WORKED_RUN, Runner
from trace_files import otlp_json_lines

from otel_agenteval.cli.main import main
from otel_agenteval.scoring.report import html

pytestmark = pytest.mark.timeout(180)

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
CLEAN = [WORKED_RUN[0], WORKED_RUN[3], WORKED_RUN[4]]
MISSING = [WORKED_RUN[0], WORKED_RUN[3]]
CASES = WORKED_CASES + """
  - id: status
    set: capability
    task: "Where is my order?"
    reference: {required: [{tool: lookup_order}], budget: {max_steps: 12}}
"""
SECRET = "my order 88120 arrived crushed"


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium or playwright missing under CI: .ci/install-tools.sh and the test extra install them")
        pytest.skip("chromium (apt-get install chromium) or playwright (pip install playwright) not installed")
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _run_with_messages(r: Runner, calls: list[tuple[str, dict[str, Any]]], case: str, trial: int) -> None:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "agenteval.case.id": case,
             "agenteval.trial": trial,
             "gen_ai.input.messages": json.dumps([{"role": "user", "content": SECRET}]),
             "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Filed."}]}])}
    with r.tracer.start_as_current_span("invoke_agent support", attributes=attrs):
        for tool, args in calls:
            with r.tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": json.dumps(args)}):
                pass


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("html")
    (d / "cases.yaml").write_text(CASES)
    (d / "policy.yaml").write_text("tools:\n  create_claim: {write: true}\n"
                                   "pricing:\n  gpt-4o: {input_per_mtok: 2.50, output_per_mtok: 10.00}\n")
    a, b = Runner(processor=False), Runner(processor=False)
    for trial in range(6):
        a.run(CLEAN if trial != 2 else MISSING, case="refund-damaged", trial=trial)
        a.run([WORKED_RUN[0]] if trial % 3 else [WORKED_RUN[0], ("lookup_order", {"order_id": "1"}, False),
                                                 WORKED_RUN[0]] + [WORKED_RUN[1]] * 5, case="status", trial=trial)
        b.run(CLEAN if trial % 2 else MISSING, case="refund-damaged", trial=trial, input_tokens=300)
        b.run([WORKED_RUN[0]], case="status", trial=trial, input_tokens=300)
    _run_with_messages(a, CLEAN, "refund-damaged", 6)
    a.run(CLEAN, case="refund-damged")  # a typo: listed as unbound
    return {"dir": d, "a": otlp_json_lines(a.spans, d / "a.jsonl"), "b": otlp_json_lines(b.spans, d / "b.jsonl"),
            "cases": d / "cases.yaml", "policy": d / "policy.yaml"}


def _score(files: dict[str, Path], capsys: pytest.CaptureFixture[str], fmt: str, *extra: str) -> tuple[int, str]:
    argv = ["score", str(files["a"]), "--cases", str(files["cases"]), "--policy", str(files["policy"]),
            "--format", fmt, "-q", *extra]
    code = main(argv)
    return code, capsys.readouterr().out


def _open(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors, requests


def _fields(page: Any, selector: str) -> dict[str, float | None]:
    got = page.eval_on_selector_all(f"{selector} [data-field]",
                                    "els => els.map(e => [e.dataset.field, e.dataset.value])")
    return {k: (None if v == "" else float(v)) for k, v in got}


def test_page_numbers_equal_the_json_report(browser: Any, files: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _score(files, capsys, "json")
    doc = json.loads(out)
    report = files["dir"] / "report.html"
    assert _score(files, capsys, "html", "--output", str(report)) == (code, "")
    page, errors, requests = _open(browser, report)
    assert errors == [] and requests == [report.as_uri()]  # nothing but the page itself
    assert page.inner_text("#gate") == html.gate_line(doc["summary"]["gate"])
    for name in ("regression", "capability"):
        s = doc["summary"][name]
        assert _fields(page, f"table.set-summary[data-set={name}]") == {
            "runs": s["runs"], "pass_rate": s["pass_rate"], "cost_per_success": s["cost_usd"]["per_success"],
            "cost_p95": s["cost_usd"]["p95"], **{k: s["efficiency"][k] for k in
                                                ("recovery_rate", "step_efficiency", "redundant_call_rate")}}
    for case in doc["cases"]:
        sel = f"section.case[data-case='{case['id']}']"
        head = page.eval_on_selector(sel, "s => Array.from(s.querySelectorAll('.case-head [data-field]'))"
                                          ".map(e => [e.dataset.field, e.dataset.value])")
        assert {k: None if v == "" else float(v) for k, v in head} == {
            "passes": case["passes"], "trials": case["trials"], "pass_hat_1": case["pass_hat_k"]["1"],
            "gate_pass_hat_k": case["gate"]["pass_hat_k"],
            **{k: case["efficiency"][k] for k in ("recovery_rate", "step_efficiency", "redundant_call_rate")}}
        # the pass^k curve: one point per k, each the report's value
        titles = page.eval_on_selector_all(f"{sel} .case-head svg circle title", "ts => ts.map(t => t.textContent)")
        want = [f"pass@k k={k}: {v:.4f}" for k, v in case["pass_at_k"].items()]
        want += [f"pass^k k={k}: {v:.4f}" for k, v in case["pass_hat_k"].items()]
        assert titles == want
        runs = page.eval_on_selector_all(f"{sel} .run", "rs => rs.map(r => [r.dataset.trace, r.dataset.verdict])")
        order = {"fail": 0, "warn": 1, "pass": 2}
        expected = sorted(([r["trace_id"], r["verdict"]] for r in case["runs"]), key=lambda tv: order[tv[1]])
        assert runs == expected  # every run, failed first
        for r in case["runs"]:
            if r["first_divergence"]:
                text = page.inner_text(f"{sel} .run[data-trace='{r['trace_id']}'] .divergence")
                assert text == r["first_divergence"]
    unbound = page.eval_on_selector_all("#unbound code", "cs => cs.map(c => c.textContent)")
    assert unbound == [u["trace_id"] for u in doc["summary"]["unbound"]["listed"]]
    assert SECRET not in page.content() and "characters hidden" in page.content()
    page.close()


def test_filters(browser: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    report = files["dir"] / "filters.html"
    _score(files, capsys, "html", "--output", str(report))
    page, errors, _ = _open(browser, report)

    def visible() -> list[str]:
        return page.eval_on_selector_all(".run", "rs => rs.filter(r => !r.hidden && r.offsetParent !== null)"
                                                 ".map(r => r.dataset.verdict)")

    every = visible()
    assert {"fail", "warn", "pass"} <= set(every) and page.inner_text("#shown") == str(len(every))
    page.uncheck("#filters input[value=pass]")
    assert sorted(visible()) == sorted(v for v in every if v != "pass")
    page.uncheck("#filters input[value=fail]")
    assert set(visible()) == {"warn"} and page.inner_text("#shown") == str(every.count("warn"))
    page.check("#filters input[value=pass]")
    page.check("#filters input[value=fail]")
    assert visible() == every and errors == []
    page.close()


def test_messages_with_show_arguments_and_the_compare_plane(browser: Any, files: dict[str, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    report = files["dir"] / "compare.html"
    plot = files["dir"] / "plane.png"
    _, out = _score(files, capsys, "json", "--compare", str(files["b"]), "--labels", "big,small", "--plot", str(plot))
    cmp = json.loads(out)["compare"]
    _score(files, capsys, "html", "--output", str(report), "--show-arguments", "--compare", str(files["b"]),
           "--labels", "big,small", "--plot", str(plot))
    page, errors, _ = _open(browser, report)
    assert errors == [] and SECRET in (page.text_content("body") or "")
    points = page.eval_on_selector_all("#plane [data-candidate]",
                                       "ps => ps.map(p => [p.dataset.candidate, p.dataset.set, +p.dataset.passRate])")
    assert sorted(points) == sorted([r["candidate"], name, r["pass_rate"]]
                                    for name, rows in cmp["sets"].items() for r in rows)
    assert page.title() == "otel-agenteval score: big vs small"
    page.close()


def test_a_case_shows_at_most_n_runs_failed_first(browser: Any, files: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html, "RUNS_PER_CASE", 2)
    report = files["dir"] / "capped.html"
    _score(files, capsys, "html", "--output", str(report))
    page, errors, _ = _open(browser, report)
    sel = "section.case[data-case='refund-damaged']"
    assert page.eval_on_selector_all(f"{sel} .run", "rs => rs.map(r => r.dataset.verdict)")[0] == "fail"
    assert page.eval_on_selector_all(f"{sel} .run", "rs => rs.length") == 2
    assert page.get_attribute(f"{sel} .not-shown", "data-count") == "5"  # 7 runs, 2 shown
    assert errors == []
    page.close()


def test_html_without_output_goes_to_stdout(browser: Any, files: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _score(files, capsys, "json")
    html_code = main(["score", str(files["a"]), "--cases", str(files["cases"]), "--policy", str(files["policy"]),
                      "--format", "html"])
    page_text, err = capsys.readouterr()
    assert html_code == code and page_text.startswith("<!DOCTYPE html>") and page_text.rstrip().endswith("</html>")
    gate = json.loads(out)["summary"]["gate"]
    assert err.splitlines()[-1] == f"score: verdict: {'FAILED (exit 1)' if gate['failed'] else 'passed (exit 0)'}; " \
                                   + html.gate_line(gate)
    report = files["dir"] / "stdout.html"
    report.write_text(page_text)
    page, errors, _ = _open(browser, report)
    assert errors == [] and page.inner_text("#gate") == html.gate_line(gate)
    page.close()


def test_the_index_links_every_case_and_every_run_shown(browser: Any, files: dict[str, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    report = files["dir"] / "index.html"
    _score(files, capsys, "html", "--output", str(report))
    page, errors, _ = _open(browser, report)
    links = page.eval_on_selector_all("#index a[href^='#']", "as => as.map(a => a.getAttribute('href'))")
    cases = page.eval_on_selector_all("section.case", "ss => ss.map(s => '#' + s.id)")
    runs = page.eval_on_selector_all("section.case .run", "rs => rs.map(r => '#' + r.id)")
    assert len(set(runs)) == len(runs) > 0 and len(set(cases)) == len(cases) == 2
    assert sorted(links) == sorted(cases + runs)  # one link to each case and to each run shown, no dead one
    # the run links read like the runs: their verdict as the link's class
    verdicts = page.eval_on_selector_all("#index .runs a", "as => as.map(a => [a.getAttribute('href'), a.className])")
    for href, verdict in verdicts:
        assert page.get_attribute(f"{href}", "data-verdict") == verdict
    # following a link brings the run into view
    target = verdicts[-1][0]
    page.click(f"#index a[href='{target}']")
    assert page.evaluate("location.hash") == target
    top = page.evaluate(f"document.querySelector('{target}').getBoundingClientRect().top")
    assert 0 <= top < page.viewport_size["height"]
    assert errors == []
    page.close()


def _chart_check(page: Any, selector: str) -> int:
    """Every chart under ``selector``: both axis titles and a legend naming each drawn series, all
    drawn inside the chart; returns how many charts there were."""
    charts = page.eval_on_selector_all(selector, """svgs => svgs.map(svg => {
        const box = svg.getBoundingClientRect();  // as drawn: rotations and translations applied
        const inside = el => { const b = el.getBoundingClientRect(); return b.width > 0 && b.left >= box.left - 1
                               && b.top >= box.top - 1 && b.right <= box.right + 1 && b.bottom <= box.bottom + 1; };
        const ax = svg.querySelector('.axis-x'), ay = svg.querySelector('.axis-y');
        return {x: ax ? ax.textContent : '', y: ay ? ay.textContent : '',
                axes_inside: !!(ax && ay && inside(ax) && inside(ay)),
                legend: Array.from(svg.querySelectorAll('.legend [data-series]')).map(g => g.dataset.series),
                legend_inside: Array.from(svg.querySelectorAll('.legend text')).every(inside),
                series: Array.from(svg.querySelectorAll('polyline[data-series]')).map(p => p.dataset.series),
                sets: Array.from(new Set(Array.from(svg.querySelectorAll('[data-set]')).map(p => p.dataset.set)))};
    })""")
    for c in charts:
        assert c["x"] and c["y"] and c["axes_inside"], c
        assert c["legend"] and c["legend_inside"], c
        assert set(c["series"]) <= set(c["legend"]), c
        assert {f"{s} set" for s in c["sets"]} <= set(c["legend"]), c
    return len(charts)


def test_every_chart_has_axes_and_a_legend(browser: Any, files: dict[str, Path],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    report = files["dir"] / "charts.html"
    plot = files["dir"] / "plane.png"
    _score(files, capsys, "html", "--output", str(report), "--compare", str(files["b"]), "--labels", "big,small",
           "--plot", str(plot))
    page, errors, _ = _open(browser, report)
    n = _chart_check(page, "svg")
    assert n == page.eval_on_selector_all("svg", "s => s.length") >= 4  # the plane, and a curve per case at least
    assert page.eval_on_selector_all("svg#plane", "s => s.length") == 1
    assert errors == []
    page.close()


def test_compare_is_side_by_side_with_differences_highlighted(browser: Any, files: dict[str, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    report = files["dir"] / "sbs.html"
    plot = files["dir"] / "plane.png"
    docs = []
    for traces in (files["a"], files["b"]):
        main(["score", str(traces), "--cases", str(files["cases"]), "--policy", str(files["policy"]),
              "--format", "json", "-q"])
        docs.append(json.loads(capsys.readouterr().out))
    _score(files, capsys, "html", "--output", str(report), "--compare", str(files["b"]), "--labels", "big,small",
           "--plot", str(plot))
    page, errors, _ = _open(browser, report)
    assert page.inner_text("#side-by-side") == "Side by side: big | small"
    rank = {"pass": 0, "warn": 1, "fail": 2}
    for case in docs[0]["cases"]:
        sel = f"section.pair[data-case='{case['id']}']"
        assert page.eval_on_selector_all(f"{sel} tr:first-child th", "ts => ts.map(t => t.textContent)") == [
            "trial", "big", "small"]
        want_a = {r["trial"]: r for r in case["runs"]}
        want_b = {r["trial"]: r for c in docs[1]["cases"] if c["id"] == case["id"] for r in c["runs"]}
        rows = page.eval_on_selector_all(f"{sel} tr[data-trial]", """rs => rs.map(r => {
            const [t, a, b] = r.querySelectorAll('td');
            const ba = a.getBoundingClientRect(), bb = b.getBoundingClientRect();
            return {trial: r.dataset.trial, differs: r.classList.contains('differs'),
                    a: a.dataset.verdict || null, b: b.dataset.verdict || null,
                    a_trace: a.dataset.trace || null, b_trace: b.dataset.trace || null,
                    moved: ['better', 'worse'].find(c => b.classList.contains(c)) || null,
                    side_by_side: ba.right <= bb.left + 1 && Math.abs(ba.top - bb.top) < 1,
                    colour: getComputedStyle(b).backgroundColor};
        })""")
        assert sorted(int(r["trial"]) for r in rows) == sorted(set(want_a) | set(want_b))
        changed = [r for r in rows if r["differs"]]
        assert rows[: len(changed)] == changed  # changed verdicts first
        for r in rows:
            ra, rb = want_a.get(int(r["trial"])), want_b.get(int(r["trial"]))
            assert (r["a_trace"], r["b_trace"]) == (ra and ra["trace_id"], rb and rb["trace_id"])
            assert (r["a"], r["b"]) == (ra and ra["verdict"], rb and rb["verdict"])
            assert r["side_by_side"]
            assert r["differs"] == (ra is None or rb is None or ra["verdict"] != rb["verdict"])
            if ra and rb and ra["verdict"] != rb["verdict"]:
                assert r["moved"] == ("better" if rank[rb["verdict"]] < rank[ra["verdict"]] else "worse")
                assert r["colour"] != "rgba(0, 0, 0, 0)"  # highlighted, visibly
            else:
                assert r["moved"] is None
        assert any(r["differs"] for r in rows)  # the two candidates do differ on every case here
    numbers = page.eval_on_selector_all("#sbs-sets tr[data-number]", """rs => rs.map(r => {
        const c = r.querySelectorAll('td'); return [r.dataset.set, r.dataset.number, c[1].textContent,
        c[2].textContent, r.classList.contains('differs')]; })""")
    by = {(s, n): (a, b, d) for s, n, a, b, d in numbers}
    for name in ("regression", "capability"):
        a, b = docs[0]["summary"][name]["pass_rate"], docs[1]["summary"][name]["pass_rate"]
        assert by[(name, "pass rate")] == (f"{a:.4g}", f"{b:.4g}", a != b)
    assert errors == []
    page.close()
