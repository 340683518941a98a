"""Every metric of the monitor, declared once: what Prometheus and OpenTelemetry both read.

An entry names the Prometheus family (counters without ``_total``), its help and labels, and,
when it goes out through OpenTelemetry too, the instrument's name, unit (UCUM) and buckets.
``prometheus.py`` and ``collectors.py`` build the Prometheus series from these entries; the OTel
bridge (``otel.py``) makes one instrument per entry with an ``otel`` name, reading
counters and gauges from the same Prometheus families at collection time (no second count) and
recording histograms as runs finish. A new metric is one entry here plus its Prometheus code.

The four GenAI agent metrics are OTel-only (``prometheus=False``), named, measured and bucketed
as the GenAI semantic conventions and opentelemetry-util-genai state them (see docs/otel.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

STEP_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128)
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
COST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# the GenAI conventions' advice (opentelemetry-util-genai 1.3b0 _instruments.py; semconv-genai)
AGENT_DURATION_BUCKETS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6)
TOOL_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
CALL_COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)

AGENT_LABELS = ("service_name", "agent_name")

# Prometheus label -> OTel attribute (others become ``agenteval.<label>``)
ATTRIBUTES = {"service_name": "service.name", "agent_name": "gen_ai.agent.name", "tool": "gen_ai.tool.name",
              "type": "gen_ai.token.type"}


@dataclass(frozen=True)
class Declared:
    name: str  # Prometheus family; counters without _total
    doc: str
    labels: tuple[str, ...] = ()
    kind: Literal["counter", "histogram", "gauge"] = "counter"
    otel: str = ""  # the OTel instrument's name; "" = Prometheus only
    unit: str = "1"
    buckets: tuple[float, ...] = ()
    prometheus: bool = True  # False: an OTel-only instrument (the GenAI conventions' own)
    value: str = ""  # a histogram's figure: a Trajectory attribute ("step_duration": each tool step's)


def attribute(label: str) -> str:
    return ATTRIBUTES.get(label, f"agenteval.{label}")


# --- per finished run (metrics.Metrics) -------------------------------------------------------
TRAJECTORIES = Declared("agenteval_trajectories", "Finished agent trajectories, by outcome.",
                        (*AGENT_LABELS, "outcome"), otel="agenteval.trajectories", unit="{trajectory}")
STEPS = Declared("agenteval_trajectory_steps", "Tool calls per finished trajectory.", AGENT_LABELS, "histogram",
                 buckets=STEP_BUCKETS)
LLM_CALLS = Declared("agenteval_trajectory_llm_calls", "LLM calls per finished trajectory.", AGENT_LABELS,
                     "histogram", buckets=STEP_BUCKETS)
DURATION = Declared("agenteval_trajectory_duration_seconds", "Wall time of finished trajectories.",
                    (*AGENT_LABELS, "outcome"), "histogram", buckets=DURATION_BUCKETS)
COST = Declared("agenteval_trajectory_cost_usd", "Model cost of finished trajectories in USD.",
                (*AGENT_LABELS, "outcome"), "histogram", otel="agenteval.trajectory.cost", unit="{USD}",
                buckets=COST_BUCKETS, value="cost_usd")  # by outcome: cost per successful task
TOKENS = Declared("agenteval_tokens", "Model tokens, from LLM spans (agent totals only as fallback).",
                  (*AGENT_LABELS, "type"), otel="agenteval.tokens", unit="{token}")
WITH_TOOL_ERRORS = Declared(
    "agenteval_trajectories_with_tool_errors",
    "Finished trajectories with at least one failed tool call, by outcome (success = recovered).",
    (*AGENT_LABELS, "outcome"), otel="agenteval.trajectories_with_tool_errors", unit="{trajectory}")
REDUNDANT = Declared("agenteval_redundant_calls",
                     "Non-write tool calls repeating an identical call in the same trajectory.",
                     (*AGENT_LABELS, "tool"), otel="agenteval.redundant_calls", unit="{call}")
VIOLATIONS = Declared("agenteval_violations", "Broken invariants, as the offending step ends.",
                      (*AGENT_LABELS, "rule", "tool", "severity"), otel="agenteval.violations", unit="{violation}")
BUDGET_BREACHES = Declared("agenteval_budget_breaches", "Budgets exceeded, once per budget per run.",
                           (*AGENT_LABELS, "budget"), otel="agenteval.budget_breaches", unit="{breach}")
OPEN_TRAJECTORIES = Declared("agenteval_open_trajectories", "Trajectories not finished yet.", kind="gauge",
                             otel="agenteval.open_trajectories", unit="{trajectory}")
RECOVERIES = Declared(
    "agenteval_tool_error_recoveries",
    "Failed tool calls, by what came next: retried_same_ok|retried_same_failed|tried_other|gave_up.",
    (*AGENT_LABELS, "tool", "next"), otel="agenteval.tool_error_recoveries", unit="{call}")
UNCHECKED = Declared("agenteval_unchecked_calls",
                     "Tool calls and runs the checks could not see into, by reason "
                     "(no_arguments: a checked tool's span has no arguments; no_token_usage: "
                     "a run's model calls carry no token counts).",
                     (*AGENT_LABELS, "tool", "reason"), otel="agenteval.unchecked_calls", unit="{call}")
TOOL_CALLS = Declared("agenteval_tool_calls", "Tool calls, as each tool span ends.", (*AGENT_LABELS, "tool", "status"),
                      otel="agenteval.tool_calls", unit="{call}")

RUNS_WITH_TOOL = Declared("agenteval_runs_with_tool",
                          "Finished trajectories that called the tool at least once (its share of runs: "
                          "divide by agenteval_trajectories_total).", (*AGENT_LABELS, "tool"),
                          otel="agenteval.runs_with_tool", unit="{trajectory}")
LOOPS = Declared("agenteval_loops", "Finished trajectories that repeated one call (same tool, same arguments) "
                 "at least outputs.loop_repeats times, by tool.", (*AGENT_LABELS, "tool"), otel="agenteval.loops",
                 unit="{trajectory}")
EXPECTED_TOOL = Declared("agenteval_policy_expected_tool",
                         "1 for each tool the policy marks expected: true (the path-mix drift alert watches them).",
                         ("tool",), "gauge", otel="agenteval.policy.expected_tool", unit="1")

# --- the GenAI semantic conventions' agent metrics (OTel only) --------------------------------
INVOKE_AGENT_DURATION = Declared(
    "", "The end-to-end duration of a single agent invocation.", ("agent_name",), "histogram",
    otel="gen_ai.invoke_agent.duration", unit="s", buckets=AGENT_DURATION_BUCKETS, prometheus=False,
    value="duration_s")
INFERENCE_CALLS = Declared(
    "", "The number of inference (model) calls a GenAI agent makes during a single invocation.", ("agent_name",),
    "histogram", otel="gen_ai.invoke_agent.inference_calls", unit="{inference_call}", buckets=CALL_COUNT_BUCKETS,
    prometheus=False, value="llm_calls")
TOOL_CALLS_PER_RUN = Declared(
    "", "The number of tool calls a GenAI agent makes during a single invocation.", ("agent_name",), "histogram",
    otel="gen_ai.invoke_agent.tool_calls", unit="{tool_call}", buckets=CALL_COUNT_BUCKETS, prometheus=False,
    value="tool_calls")
EXECUTE_TOOL_DURATION = Declared(
    "", "The duration of a single tool execution.", ("agent_name", "tool"), "histogram",
    otel="gen_ai.execute_tool.duration", unit="s", buckets=TOOL_DURATION_BUCKETS, prometheus=False,
    value="step_duration")

# --- the engine's own counters, read at scrape time (collectors.SelfCollector) -----------------
LABEL_OVERFLOW = Declared("agenteval_label_overflow",
                          "Metric updates whose agent_name or tool was counted as `other` because "
                          "limits.max_agent_labels / limits.max_tool_labels was reached, by label.", ("label",),
                          otel="agenteval.label_overflow", unit="{update}")
SPANS = Declared("agenteval_spans", "Spans seen at end, by kind.", ("kind",), otel="agenteval.spans", unit="{span}")
EVICTED = Declared("agenteval_trajectories_evicted", "Trajectories finalised early as incomplete, by reason.",
                   ("reason",), otel="agenteval.trajectories_evicted", unit="{trajectory}")
LATE_SPANS = Declared("agenteval_late_spans", "Spans that ended after their trajectory was finalised.",
                      otel="agenteval.late_spans", unit="{span}")
UNREAD_SPANS = Declared("agenteval_unread_spans",
                        "Spans that look like agent work (gen_ai.*, llm.*, ai.*, traceloop.*, haystack.*, "
                        "OpenInference) but were read as no tool call, model call or agent run, by "
                        "instrumentation scope (unknown: none recorded; other: past 64 scopes).",
                        ("scope",), otel="agenteval.unread_spans", unit="{span}")
FRAGMENTED_SPANS = Declared("agenteval_fragmented_spans",
                            "Roots that are pieces of agent runs, each arriving as a trace of its own (the "
                            "instrumentation does not propagate context): tool calls with no agent around them, "
                            "and, once a scope sends those, its lone model calls and workflows; by "
                            "instrumentation scope.", ("scope",), otel="agenteval.fragmented_spans", unit="{span}")
FRAGMENTS_STITCHED = Declared("agenteval_fragments_stitched",
                              "Pieces of agent runs, each a trace of its own, put back into one run because one "
                              "piece's time window holds all the others (engine/fragments/), by instrumentation "
                              "scope.", ("scope",), otel="agenteval.fragments_stitched", unit="{span}")
FRAGMENTS_UNSTITCHED = Declared("agenteval_fragments_unstitched",
                                "Pieces of agent runs, each a trace of its own, left apart (read as today's "
                                "fragments), by instrumentation scope and reason: concurrent (runs overlapping in "
                                "time), alone (no piece around or in it), buffer_full (held pieces' bound reached).",
                                ("scope", "reason"), otel="agenteval.fragments_unstitched", unit="{span}")
STEPS_DROPPED = Declared("agenteval_steps_dropped",
                         "Tool steps not kept because a trajectory hit max_steps_per_trajectory (still counted).",
                         otel="agenteval.steps_dropped", unit="{step}")
OPEN_SPANS_DROPPED = Declared("agenteval_open_spans_dropped",
                              "Open spans forgotten because limits.max_open_spans was reached.",
                              otel="agenteval.open_spans_dropped", unit="{span}")
SPANS_DROPPED = Declared("agenteval_spans_dropped",
                         "Spans not processed, by reason: ended by the monitor's own rules or callbacks "
                         "(reentrant), delivered twice (duplicate), ended after shutdown, found the "
                         "checks' queue full (queue_full) or still queued when shutdown's time ran out "
                         "(shutdown_timeout), both with background=True.",
                         ("reason",), otel="agenteval.spans_dropped", unit="{span}")
STATE_DROPPED = Declared("agenteval_state_dropped",
                         "Entries of bounded per-run and per-conversation maps not kept (writes, repeats).",
                         otel="agenteval.state_dropped", unit="{entry}")
LOG_LINES_DROPPED = Declared("agenteval_log_lines_dropped",
                             "The product's log lines not written because lines of their kind (event, rule, "
                             "service, agent, tool) came faster than the log's sampling writes them "
                             "(outputs.log_sampling; by default the first 10 in each 10 s, then one in 100); by event.",
                             ("event",), otel="agenteval.log_lines_dropped", unit="{line}")
CLOCK_SKEW = Declared("agenteval_clock_skew_spans",
                      "Recorded spans dated more than a day past the wall clock (not moving the replay clock).",
                      otel="agenteval.clock_skew_spans", unit="{span}")
CONVERSATIONS_EVICTED = Declared("agenteval_conversations_evicted", "Conversation states dropped, by reason.",
                                 ("reason",), otel="agenteval.conversations_evicted", unit="{conversation}")
PROCESSOR_ERRORS = Declared("agenteval_processor_errors",
                            "Exceptions caught inside the processor (never raised to the host), by stage.",
                            ("stage",), otel="agenteval.processor_errors", unit="{error}")
QUEUED_SPANS = Declared("agenteval_queued_spans", "Span ends waiting for the checks' thread (background=True).",
                        kind="gauge", otel="agenteval.queued_spans", unit="{span}")

# --- the guard (metrics.GuardMetrics, made when the first guard is built) ------------------------
BLOCKED_ACTIONS = Declared("agenteval_blocked_actions", "Tool calls the guard stopped before they ran.",
                           (*AGENT_LABELS, "rule", "tool"), otel="agenteval.blocked_actions", unit="{call}")
GUARD_WOULD_BLOCK = Declared("agenteval_guard_would_block",
                             "Tool calls the guard would have stopped, let run (mode: observe).",
                             (*AGENT_LABELS, "rule", "tool"), otel="agenteval.guard.would_block", unit="{call}")
GUARD_ERRORS = Declared("agenteval_guard_errors",
                        "Guard decisions it could not make, by fail closed|open (record: made, not recorded).",
                        ("fail",), otel="agenteval.guard.errors", unit="{error}")

# --- the judge (judging/sink.JudgeSeries, made when the policy's judge section is on) -----------
JUDGE_SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
JUDGE_SAMPLED = Declared("agenteval_judge_sampled", "Finished runs chosen for the judge, by why (sampled, flagged).",
                         ("reason",))
JUDGE_JUDGED = Declared("agenteval_judge_judged", "Judgements made, by dimension and the judge's label.",
                        ("dimension", "label"))
JUDGE_SCORE = Declared("agenteval_judge_score", "The judge's scores (0 worst, 1 best), by dimension.",
                       ("dimension",), "histogram", buckets=JUDGE_SCORE_BUCKETS)
JUDGE_DROPPED = Declared("agenteval_judge_dropped", "Sampled runs never judged, by reason (queue_full, shutdown).",
                         ("reason",))
JUDGE_TIMEOUTS = Declared("agenteval_judge_timeouts", "Judge requests timed out after their retries, by dimension.",
                          ("dimension",))
JUDGE_ERRORS = Declared("agenteval_judge_errors", "Judgements that failed (not timeouts), by dimension and reason.",
                        ("dimension", "reason"))
JUDGE_QUEUED = Declared("agenteval_judge_queued_runs", "Sampled runs waiting for the judge.", kind="gauge")

# --- serve's receiver (receiver/pipeline.ReceiverMetrics, in the engine's registry) -------------
RECEIVER_REQUESTS = Declared("agenteval_receiver_requests", "OTLP export requests, by protocol and result.",
                             ("protocol", "result"), otel="agenteval.receiver.requests", unit="{request}")
RECEIVER_SPANS = Declared("agenteval_receiver_spans",
                          "Spans received: accepted into the queue, rejected as unreadable (partial success), "
                          "or refused for the client to retry (queue full, shutting down).",
                          ("protocol", "result"), otel="agenteval.receiver.spans", unit="{span}")
RECEIVER_TRACES = Declared("agenteval_receiver_traces", "Traces played into the engine, by why they were due.",
                           ("reason",), otel="agenteval.receiver.traces", unit="{trace}")
RECEIVER_DUPLICATES = Declared("agenteval_receiver_duplicate_spans",
                               "Spans received twice for a trace (client retries), played once.",
                               otel="agenteval.receiver.duplicate_spans", unit="{span}")
RECEIVER_ERRORS = Declared("agenteval_receiver_errors", "Unexpected errors in the receiver, by stage.", ("stage",),
                           otel="agenteval.receiver.errors", unit="{error}")
RECEIVER_QUEUE_SPANS = Declared("agenteval_receiver_queue_spans", "Spans waiting in the ingest queue.",
                                kind="gauge", otel="agenteval.receiver.queue.size", unit="{span}")
RECEIVER_QUEUE_CAPACITY = Declared("agenteval_receiver_queue_capacity_spans", "Ingest queue bound, in spans.",
                                   kind="gauge", otel="agenteval.receiver.queue.capacity", unit="{span}")
RECEIVER_HELD_SPANS = Declared("agenteval_receiver_held_spans", "Spans held while their traces complete.",
                               kind="gauge", otel="agenteval.receiver.held_spans", unit="{span}")
RECEIVER_HELD_TRACES = Declared("agenteval_receiver_held_traces", "Traces held while they complete.", kind="gauge",
                                otel="agenteval.receiver.held_traces", unit="{trace}")
RECEIVER_CONNECTIONS_CLOSED = Declared(
    "agenteval_receiver_connections_closed",
    "HTTP connections closed by the listener, by listener (otlp_http, ops) and reason: idle, read_timeout "
    "(headers too slow), evicted (idle the longest when --max-connections was reached), refused (503: all busy).",
    ("listener", "reason"), otel="agenteval.receiver.connections_closed", unit="{connection}")
RECEIVER_MEMORY = Declared("agenteval_receiver_memory_bytes",
                           "Memory budget in use (--memory-limit-mib), by kind: bodies (being read or decoded), "
                           "spans (queued or held).", ("kind",), "gauge", otel="agenteval.receiver.memory.usage",
                           unit="By")
RECEIVER_MEMORY_LIMIT = Declared("agenteval_receiver_memory_limit_bytes", "The memory budget (--memory-limit-mib).",
                                 kind="gauge", otel="agenteval.receiver.memory.limit", unit="By")
RECEIVER_ALLOCATOR_TRIMS = Declared("agenteval_receiver_allocator_trims",
                                    "Times the allocator gave freed heap back to the OS after a burst "
                                    "(malloc_trim, once use fell and stayed down).",
                                    otel="agenteval.receiver.allocator.trims", unit="{trim}")
RECEIVER_DRAIN_LOST = Declared("agenteval_receiver_drain_lost",
                               "What a drain that ran out of --drain-timeout left unchecked at shutdown: "
                               "runs (traces queued or held, runs open) and spans.", ("kind",),
                               otel="agenteval.receiver.drain_lost", unit="{item}")

# --- the /metrics endpoint's own (metrics/exposition.py: serve, wsgi_app, asgi_app) ----------------
# Prometheus only: the OTel bridge reads the engine, not the scrape
SCRAPE_ERRORS = Declared("agenteval_scrape_errors", "Collectors left out of a scrape because they raised.")

# --- serve's write-ahead log (receiver/durability.WalMetrics, with --wal-dir) -------------------
WAL_REFUSED = Declared("agenteval_wal_refused_spans",
                       "Spans refused (429 / RESOURCE_EXHAUSTED) because the write-ahead log could not take them: "
                       "full (--wal-max-bytes) or the disk refused the write or sync.", ("reason",),
                       otel="agenteval.wal.refused_spans", unit="{span}")
WAL_RECOVERED = Declared("agenteval_wal_recovered_spans",
                         "Spans read back from the write-ahead log at start-up and held again.",
                         otel="agenteval.wal.recovered_spans", unit="{span}")
WAL_CUT = Declared("agenteval_wal_cut_bytes", "Bytes of a torn or corrupt log tail cut at start-up.",
                   otel="agenteval.wal.cut", unit="By")
WAL_UNREADABLE = Declared("agenteval_wal_unreadable_records",
                          "Logged requests that could not be decoded again at start-up (skipped).",
                          otel="agenteval.wal.unreadable_records", unit="{record}")
WAL_SYNCS = Declared("agenteval_wal_syncs", "Group syncs (fsync) of the write-ahead log.", kind="gauge",
                     otel="agenteval.wal.syncs", unit="{sync}")
WAL_BYTES = Declared("agenteval_wal_bytes", "Bytes in the write-ahead log's segments.", kind="gauge",
                     otel="agenteval.wal.usage", unit="By")
WAL_CAPACITY = Declared("agenteval_wal_capacity_bytes", "The write-ahead log's bound (--wal-max-bytes).",
                        kind="gauge", otel="agenteval.wal.limit", unit="By")
WAL_SEGMENTS = Declared("agenteval_wal_segments", "Segment files in the write-ahead log.", kind="gauge",
                        otel="agenteval.wal.segments", unit="{segment}")
WAL_REFUSING = Declared("agenteval_wal_refusing",
                        "1 while the write-ahead log's disk refuses writes (full or failing): requests are refused "
                        "until played segments are dropped or space is freed; 0 otherwise.", kind="gauge",
                        otel="agenteval.wal.refusing", unit="1")

CATALOGUE: tuple[Declared, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Declared))
