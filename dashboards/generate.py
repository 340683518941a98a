"""Generate the Grafana dashboards of this repository with grafana-foundation-sdk.

    python -m dashboards.generate            # rewrite dashboards/*.json
    python -m dashboards.generate --check    # exit 1 if a committed file is out of date

Needs the ``dashboards`` extra (``grafana-foundation-sdk``, Grafana 11.6 types, Python ≥ 3.11).
Every query reads only the metrics of ``otel_agenteval/metrics/prometheus.py``; recording rules are not
needed. ``tests/test_prometheus_integration.py`` runs every expression here against a real
Prometheus scraping the demo.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import bargauge, heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as hm
from grafana_foundation_sdk.models import prometheus as pm

HERE = Path(__file__).resolve().parent
UID = "agenteval-overview"
JOB = "agenteval"  # the scrape job of deploy/prometheus/prometheus.yml and the alert rules
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'service_name=~"$service_name", agent_name=~"$agent_name"'
RI = "$__rate_interval"
SUCCESS = 'outcome="success"'
CRITICAL = 'severity="critical"'
ERROR = 'status="error"'
RETRIED = 'rule="write_retried_after_error"'
RECOVERED = 'next=~"tried_other|retried_same_ok"'


def _sel(extra: str = "") -> str:
    return "{" + SEL + (", " + extra if extra else "") + "}"


def in_range(series: str, by: str = "") -> str:
    """Growth of counter ``series`` over the dashboard's time range, by ``by`` labels.

    ``increase()`` cannot see the first sample of a series, and a violation usually creates its
    series at 1: series that existed when the range began count their ``increase()``, series
    born inside it count their whole value.
    """
    born = f"({series} unless {series} offset $__range)"
    agg = f"sum by ({by}) " if by else "sum "
    old, new = f"{agg}(increase({series}[$__range]) unless {born})", f"{agg}{born}"
    return f"({old} + {new}) or {old} or {new}"


def q(expr: str, legend: str = "", ref: str = "A", *, instant: bool = False, fmt: pm.PromQueryFormat | None = None,
      exemplar: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS).exemplar(exemplar)
    if legend:
        query = query.legend_format(legend)
    if instant:
        query = query.instant()
    else:
        query = query.range()
    if fmt is not None:
        query = query.format(fmt)
    return query


def _legend() -> common_b.VizLegendOptions:
    return (common_b.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.TABLE)
            .placement(cm.LegendPlacement.BOTTOM).calcs(["mean", "max"]))


def ts(title: str, description: str, unit: str, *queries: prometheus.Dataquery, w: int = 8, h: int = 8,
       stack: bool = False) -> timeseries.Panel:
    p = (timeseries.Panel().title(title).description(description).datasource(DS).unit(unit).span(w).height(h)
         .legend(_legend()).fill_opacity(10).line_width(1).show_points(cm.VisibilityMode.NEVER))
    if stack:
        p = p.stacking(common_b.StackingConfig().mode(cm.StackingMode.NORMAL)).fill_opacity(40)
    for query in queries:
        p = p.with_target(query)
    return p


def stat_panel(title: str, description: str, unit: str, query: prometheus.Dataquery, w: int = 6,
               decimals: int | None = None) -> stat.Panel:
    p = (stat.Panel().title(title).description(description).datasource(DS).unit(unit).span(w).height(4)
         .graph_mode(cm.BigValueGraphMode.AREA).color_mode(cm.BigValueColorMode.VALUE)
         .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
         .with_target(query))
    if decimals is not None:
        p = p.decimals(decimals)
    return p


def top_tools(title: str, description: str, expr: str) -> bargauge.Panel:
    return (bargauge.Panel().title(title).description(description).datasource(DS).unit("short").span(6).height(8)
            .orientation(cm.VizOrientation.HORIZONTAL).display_mode(cm.BarGaugeDisplayMode.GRADIENT)
            .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
            .with_target(q(expr, "{{tool}}", instant=True)))


def _variables() -> list[Any]:
    return [
        dash.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        (dash.QueryVariable("service_name").label("Service").datasource(DS)
         .query("label_values(agenteval_trajectories_total, service_name)")
         .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC)
         .multi(True).include_all(True).all_value(".*")),
        (dash.QueryVariable("agent_name").label("Agent").datasource(DS)
         .query('label_values(agenteval_trajectories_total{service_name=~"$service_name"}, agent_name)')
         .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC)
         .multi(True).include_all(True).all_value(".*")),
    ]


def overview() -> dash.Dashboard:
    """The overview: outcomes, steps, model use, violations, tools, and the monitor's own health."""
    traj = f"agenteval_trajectories_total{_sel()}"
    success = f"agenteval_trajectories_total{_sel(SUCCESS)}"
    steps = f"agenteval_trajectory_steps_bucket{_sel()}"
    d = (dash.Dashboard("Agent trajectories — overview").uid(UID)
         .description("otel-agenteval: agent runs rebuilt from GenAI spans, checked inline. "
                      "Generated by dashboards/generate.py; edit that, not this JSON.")
         .tags(["agenteval", "genai", "agents"]).editable().time("now-1h", "now").refresh("30s")
         .timezone("browser").tooltip(dm.DashboardCursorSync.CROSSHAIR)
         .variables(_variables())
         .link(dash.DashboardLink("Alert rules").type(dm.DashboardLinkType.LINK)
               .url("/alerting/list?search=agenteval").icon("bell").keep_time(False).target_blank(False)))

    # --- headline numbers -----------------------------------------------------------------------
    d = (d.with_row(dash.Row("Outcomes"))
         .with_panel(stat_panel("Trajectories/s", "Finished agent runs per second.", "ops",
                                q(f"sum(rate({traj}[{RI}]))")))
         .with_panel(stat_panel("Success rate", "Share of finished runs whose outcome is success.", "percentunit",
                                q(f"sum(rate({success}[{RI}])) / sum(rate({traj}[{RI}]))"), decimals=1))
         .with_panel(stat_panel("Cost per successful task", "Model cost of all runs divided by successful runs.",
                                "currencyUSD",
                                q(f"sum(rate(agenteval_trajectory_cost_usd_sum{_sel()}[{RI}]))"
                                  f" / sum(rate({success}[{RI}]))"), decimals=4))
         .with_panel(stat_panel("Critical violations", "Critical violations in the selected time range.", "short",
                                q(in_range(f"agenteval_violations_total{_sel(CRITICAL)}"),
                                  instant=True), decimals=0))
         .with_panel(ts("Trajectories/s by outcome", "Finished runs per second, stacked by outcome.", "ops",
                        q(f"sum by (outcome) (rate({traj}[{RI}]))", "{{outcome}}"), stack=True))
         .with_panel(ts("Success rate by agent", "Share of each agent's finished runs that succeeded.",
                        "percentunit",
                        q(f"sum by (agent_name) (rate({success}[{RI}]))"
                          f" / sum by (agent_name) (rate({traj}[{RI}]))", "{{agent_name}}")))
         .with_panel(ts("Cost per successful task by agent",
                        "Model cost of each agent's runs (successful or not) per successful run.", "currencyUSD",
                        q(f"sum by (agent_name) (rate(agenteval_trajectory_cost_usd_sum{_sel()}[{RI}]))"
                          f" / sum by (agent_name) (rate({success}[{RI}]))", "{{agent_name}}"))))

    # --- steps ------------------------------------------------------------------------------------
    d = (d.with_row(dash.Row("Steps"))
         .with_panel(heatmap.Panel().title("Tool calls per trajectory").datasource(DS).span(12).height(9)
                     .description("Distribution of tool calls per finished run. Exemplars link to traces.")
                     .calculate(False).cell_gap(1)
                     .color(heatmap.HeatmapColorOptions().mode(hm.HeatmapColorMode.SCHEME).scheme("Oranges")
                            .steps(64).exponent(0.5))
                     .rows_frame(heatmap.RowsHeatmapOptions().layout(cm.HeatmapCellLayout.LE))
                     .y_axis(heatmap.YAxisConfig().unit("short").decimals(0))
                     .show_value(cm.VisibilityMode.NEVER)
                     .with_target(q(f"sum by (le) (increase({steps}[{RI}]))", "{{le}}",
                                    fmt=pm.PromQueryFormat.HEATMAP, exemplar=True)))
         .with_panel(ts("Tool calls per trajectory: p50 / p95 / p99",
                        "Step-count percentiles per agent (interpolated within histogram buckets). "
                        "Exemplars on p99 link to the traces of long runs.", "short",
                        q(f"histogram_quantile(0.5, sum by (le, agent_name) (rate({steps}[{RI}])))",
                          "p50 {{agent_name}}", "A"),
                        q(f"histogram_quantile(0.95, sum by (le, agent_name) (rate({steps}[{RI}])))",
                          "p95 {{agent_name}}", "B"),
                        q(f"histogram_quantile(0.99, sum by (le, agent_name) (rate({steps}[{RI}])))",
                          "p99 {{agent_name}}", "C", exemplar=True), w=12, h=9))
         .with_panel(ts("Run duration p95", "95th percentile of run wall time per agent.", "s",
                        q("histogram_quantile(0.95, sum by (le, agent_name) "
                          f"(rate(agenteval_trajectory_duration_seconds_bucket{_sel()}[{RI}])))", "{{agent_name}}")))
         .with_panel(ts("LLM calls", "LLM calls per second, and per finished run on average.", "short",
                        q(f"sum by (agent_name) (rate(agenteval_trajectory_llm_calls_sum{_sel()}[{RI}]))",
                          "calls/s {{agent_name}}", "A"),
                        q(f"sum by (agent_name) (rate(agenteval_trajectory_llm_calls_sum{_sel()}[{RI}]))"
                          f" / sum by (agent_name) (rate(agenteval_trajectory_llm_calls_count{_sel()}[{RI}]))",
                          "per run {{agent_name}}", "B")))
         .with_panel(ts("Tokens/s", "Model tokens per second by type (input, output) and agent.", "short",
                        q(f"sum by (type, agent_name) (rate(agenteval_tokens_total{_sel()}[{RI}]))",
                          "{{type}} {{agent_name}}"), stack=True)))

    # --- violations ---------------------------------------------------------------------------------
    viol = f"agenteval_violations_total{_sel()}"
    d = (d.with_row(dash.Row("Violations"))
         .with_panel(ts("Violations/s by rule and agent", "Broken invariants per second. Exemplars link to traces.",
                        "short", q(f"sum by (rule, agent_name) (rate({viol}[{RI}]))",
                                   "{{rule}} · {{agent_name}}", exemplar=True), w=12, h=9))
         .with_panel(table.Panel().title("Violations in range by rule and agent").datasource(DS).span(12).height(9)
                     .description("Violations counted in the selected time range; zero rows are rules that held.")
                     .with_target(q(f"sort_desc({in_range(viol, 'rule, agent_name, severity')})",
                                    instant=True, fmt=pm.PromQueryFormat.TABLE))
                     .with_transformation(dm.DataTransformerConfig(id_val="organize", options={
                         "excludeByName": {"Time": True},
                         "indexByName": {"rule": 0, "agent_name": 1, "severity": 2, "Value": 3},
                         "renameByName": {"Value": "violations", "agent_name": "agent"}}))
                     .sort_by([common_b.TableSortByFieldState().display_name("violations").desc(True)]))
         .with_panel(ts("Budget breaches/s", "Runs exceeding a budget, by budget and agent.", "short",
                        q(f"sum by (budget, agent_name) (rate(agenteval_budget_breaches_total{_sel()}[{RI}]))",
                          "{{budget}} · {{agent_name}}"), w=24, h=7))
         .with_panel(ts("Blocked tool calls/s",
                        "Tool calls the guard stopped before they ran, by rule and tool (not violations: they did "
                        "not happen); and, in mode observe, the calls it would have stopped.", "short",
                        q(f'sum by (decision, rule, tool, agent_name) ('
                          f'label_replace(rate(agenteval_blocked_actions_total{_sel()}[{RI}]), "decision", "blocked", "", "")'
                          f' or label_replace(rate(agenteval_guard_would_block_total{_sel()}[{RI}]), "decision", '
                          f'"would block", "", ""))', "{{decision}} {{rule}} {{tool}} · {{agent_name}}"),
                        w=24, h=7)))

    # --- tools ----------------------------------------------------------------------------------------
    calls = "agenteval_tool_calls_total"
    d = (d.with_row(dash.Row("Tools"))
         .with_panel(top_tools("Top tools by calls", "Tool calls in the selected time range, top 10.",
                               f"topk(10, {in_range(calls + _sel(), 'tool')})"))
         .with_panel(top_tools("Top tools by errors", "Failed tool calls in the selected time range, top 10.",
                               f"topk(10, {in_range(calls + _sel(ERROR), 'tool')})"))
         .with_panel(ts("Tool error ratio", "Share of each tool's calls that failed.", "percentunit",
                        q(f"sum by (tool) (rate({calls}{_sel(ERROR)}[{RI}]))"
                          f" / sum by (tool) (rate({calls}{_sel()}[{RI}]))", "{{tool}}"), w=12))
         .with_panel(ts("Tool-error recovery",
                        "Of the runs that hit a failed tool call, the share that still succeeded; and writes "
                        "retried after an error.", "percentunit",
                        q(f"sum by (agent_name) (rate(agenteval_trajectories_with_tool_errors_total{_sel(SUCCESS)}[{RI}]))"
                          f" / sum by (agent_name) (rate(agenteval_trajectories_with_tool_errors_total{_sel()}[{RI}]))",
                          "recovered {{agent_name}}", "A"),
                        q(f"sum by (agent_name) (rate(agenteval_violations_total{_sel(RETRIED)}[{RI}]))",
                          "write retries/s {{agent_name}}", "B"), w=12)
                     .override_by_regexp("^write retries.*", [
                         dm.DynamicConfigValue(id_val="unit", value="short"),
                         dm.DynamicConfigValue(id_val="custom.axisPlacement", value="right")]))
         .with_panel(ts("Redundant calls/s", "Non-write tool calls repeating an identical call in the same run.",
                        "short", q(f"sum by (tool, agent_name) (rate(agenteval_redundant_calls_total{_sel()}[{RI}]))",
                                   "{{tool}} · {{agent_name}}"), w=12))
         .with_panel(ts("Unchecked calls/s",
                        "Calls the checks could not see into: no_arguments (a checked tool's spans carry no "
                        "arguments: turn on the framework's content capture, see the processor's log) and "
                        "no_token_usage (model calls without token counts).", "short",
                        q(f"sum by (reason, tool, agent_name) (rate(agenteval_unchecked_calls_total{_sel()}[{RI}]))",
                          "{{reason}} {{tool}} · {{agent_name}}"), w=12))
         .with_panel(ts("Tool-error recovery rate",
                        "Of the failed tool calls, the share the agent recovered from: it tried another call, or "
                        "retried the same call and the retry succeeded (gave_up: no successful call after it).",
                        "percentunit",
                        q(f"sum by (agent_name) (rate(agenteval_tool_error_recoveries_total{_sel(RECOVERED)}[{RI}]))"
                          f" / sum by (agent_name) (rate(agenteval_tool_error_recoveries_total{_sel()}[{RI}]))",
                          "{{agent_name}}"), w=12)))

    # --- paths: each tool's share of runs (drift), loops --------------------------------------------------
    share = (f"sum by (tool, agent_name) (rate(agenteval_runs_with_tool_total{_sel()}[{RI}]))"
             f" / on (agent_name) group_left sum by (agent_name) (rate({traj}[{RI}]))")
    d = (d.with_row(dash.Row("Paths"))
         .with_panel(ts("Share of runs calling each tool",
                        "Of each agent's finished runs, the share that called the tool at least once. For the tools "
                        "the policy marks expected, AgentExpectedToolShareDropped warns when the hourly share falls "
                        "more than 10 points below the same hour a day before.", "percentunit",
                        q(share, "{{tool}} · {{agent_name}}"), w=16, h=8))
         .with_panel(ts("Looping runs/s", "Runs that repeated one call (same tool, same arguments) at least "
                        "outputs.loop_repeats times, by tool.", "short",
                        q(f"sum by (tool, agent_name) (rate(agenteval_loops_total{_sel()}[{RI}]))",
                          "{{tool}} · {{agent_name}}"), w=8, h=8)))

    # --- the judge: a sample of runs scored beside the rules; informs, never gates ----------------------
    d = (d.with_row(dash.Row("Judge"))
         .with_panel(ts("Judge score by dimension: p50 / p10",
                        "The judge's scores (0 worst, 1 best) of the sampled runs, by dimension. A dimension's "
                        "score is trusted only with a recorded agreement with people (docs/judge.md).", "short",
                        q(f"histogram_quantile(0.5, sum by (le, dimension) (rate(agenteval_judge_score_bucket[{RI}])))",
                          "p50 {{dimension}}", "A"),
                        q(f"histogram_quantile(0.1, sum by (le, dimension) (rate(agenteval_judge_score_bucket[{RI}])))",
                          "p10 {{dimension}}", "B"), w=8, h=8))
         .with_panel(ts("Judgements/s by dimension and label", "Judgements made per second, by the judge's label.",
                        "short", q(f"sum by (dimension, label) (rate(agenteval_judge_judged_total[{RI}]))",
                                   "{{dimension}}: {{label}}"), w=8, h=8, stack=True))
         .with_panel(ts("Judge: sampled, dropped, timed out, failed",
                        "Runs sampled for the judge (by trace id, or flagged by a critical finding), and what never "
                        "became a judgement: dropped (queue full, shutdown), timed out, failed.", "short",
                        q(f"sum by (reason) (rate(agenteval_judge_sampled_total[{RI}]))", "sampled: {{reason}}", "A"),
                        q(f"sum by (reason) (rate(agenteval_judge_dropped_total[{RI}]))", "dropped: {{reason}}", "B"),
                        q(f"sum by (dimension) (rate(agenteval_judge_timeouts_total[{RI}]))",
                          "timed out: {{dimension}}", "C"),
                        q(f"sum by (reason) (rate(agenteval_judge_errors_total[{RI}]))", "failed: {{reason}}", "D"),
                        w=8, h=8)))

    # --- the monitor itself ------------------------------------------------------------------------------
    d = (d.with_row(dash.Row("Monitor health"))
         .with_panel(ts("Scrape target up", f"up of the {JOB} scrape job, per instance.", "short",
                        q(f'up{{job="{JOB}"}}', "{{instance}}"), w=6, h=7))
         .with_panel(ts("Spans/s by kind", "Spans seen by the processor, by kind.", "short",
                        q(f"sum by (kind) (rate(agenteval_spans_total[{RI}]))", "{{kind}}"), w=6, h=7, stack=True))
         .with_panel(ts("Open trajectories", "Runs started and not finished yet, per instance.", "short",
                        q("sum by (instance) (agenteval_open_trajectories)", "{{instance}}"), w=6, h=7))
         .with_panel(ts("Processor errors/s", "Exceptions caught inside the processor, by stage.", "short",
                        q(f"sum by (stage) (rate(agenteval_processor_errors_total[{RI}]))", "{{stage}}"), w=6, h=7))
         .with_panel(ts("Evictions, late spans and dropped steps", "What the bounded state had to give up, per second.",
                        "short",
                        q(f"sum by (reason) (rate(agenteval_trajectories_evicted_total[{RI}]))",
                          "trajectories evicted: {{reason}}", "A"),
                        q(f"sum by (reason) (rate(agenteval_conversations_evicted_total[{RI}]))",
                          "conversations evicted: {{reason}}", "B"),
                        q(f"sum(rate(agenteval_late_spans_total[{RI}]))", "late spans", "C"),
                        q(f"sum(rate(agenteval_steps_dropped_total[{RI}]))", "steps dropped", "D"), w=24, h=7))
         .with_panel(ts("Unread spans/s by scope",
                        "Spans that look like agent work (gen_ai.*, llm.*, ai.*, traceloop.*, haystack.*, OpenInference) "
                        "but were read as no tool call, model call or agent run, by instrumentation scope: a framework "
                        "the checks cannot see (the processor's log says what to do, once per scope).", "short",
                        q(f"sum by (scope) (rate(agenteval_unread_spans_total[{RI}]))", "{{scope}}"), w=24, h=7))
         .with_panel(ts("Runs in pieces: spans/s by scope",
                        "Pieces of runs arriving each as a trace of its own (the app's instrumentation does not "
                        "propagate context): read apart (the runs counted wrong), put back together by time, and "
                        "not put back together by why (concurrent: runs at once; buffer_full, memory: a bound on "
                        "what is held was reached).", "short",
                        q(f"sum by (scope) (rate(agenteval_fragmented_spans_total[{RI}]))", "read apart: {{scope}}", "A"),
                        q(f"sum by (scope) (rate(agenteval_fragments_stitched_total[{RI}]))",
                          "put back together: {{scope}}", "B"),
                        q(f"sum by (scope, reason) (rate(agenteval_fragments_unstitched_total[{RI}]))",
                          "not put back together: {{scope}} ({{reason}})", "C"), w=24, h=7)))
    return d


DASHBOARDS = {"agenteval-overview.json": overview}


def render(builder: dash.Dashboard) -> str:
    """Stable JSON: sorted keys, panel ids in order, two-space indent, trailing newline."""
    model = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    for i, panel in enumerate(model.get("panels", []), start=1):
        panel["id"] = i
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dashboards.generate", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="do not write; exit 1 if a file is out of date")
    p.add_argument("--out", type=Path, default=HERE, help="output directory (default: dashboards/)")
    args = p.parse_args(argv)
    stale = []
    for name, make in DASHBOARDS.items():
        text = render(make())
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path}", file=sys.stderr)
    if stale:
        print(f"out of date (run `make dashboards`): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
