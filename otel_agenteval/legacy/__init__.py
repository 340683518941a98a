"""Module paths from before the package was laid out by stage (0.1), kept for one release.

``import otel_agenteval.trajectory`` still works: it imports ``otel_agenteval.model.trajectory``, with
a :class:`DeprecationWarning` that names the new path. Installed by ``otel_agenteval/__init__.py``;
this table is the whole of it. Paths that are packages now (``policy``, ``guard``, ``cli``) keep
their public names in the package itself.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Final

MOVED: Final[dict[str, str]] = {
    "arguments": "model.arguments",
    "steps": "model.steps",
    "trajectory": "model.trajectory",
    "violation": "model.violation",
    "rule_names": "model.rule_names",
    "recovery": "model.recovery",
    "summary": "model.summary",
    "scoring.normalise": "model.normalise",
    "policy_sections": "policy.sections",
    "guard_policy": "policy.guard_section",
    "write_verbs": "policy.write_verbs",
    "config_file": "policy.config_file",
    "starter_policy": "policy.starter",
    "_semconv": "reading.semconv",
    "_spanfields": "reading.spanfields",
    "spans": "reading.spans",
    "span_values": "reading.span_values",
    "frameworks": "reading.frameworks",
    "tool_steps": "reading.tool_steps",
    "extract": "reading.extract",
    "content": "reading.content",
    "confirmations": "reading.confirmations",
    "labels": "reading.labels",
    "unread": "reading.unread",
    "routing": "engine.routing",
    "store": "engine.store",
    "events": "engine.events",
    "dispatch": "engine.dispatch",
    "assemble": "engine.assemble",
    "finalise": "engine.finalise",
    "sinks": "engine.sinks",
    "handoff": "engine.handoff",
    "errors": "engine.errors",
    "_threadstate": "engine.threadstate",
    "self_stats": "engine.self_stats",
    "metric_catalogue": "metrics.catalogue",
    "_series": "metrics.series",
    "collectors": "metrics.collectors",
    "exposition": "metrics.exposition",
    "otel_metrics": "metrics.otel",
    "evaluation_events": "metrics.evaluation_events",
    "blindspots": "metrics.blindspots",
    "monitor": "metrics.monitor",
    "guard_holds": "guard.holds",
    "decision": "guard.decision",
    "hooks.langgraph": "guard.hooks.langgraph",
    "hooks.openai_agents": "guard.hooks.openai_agents",
    "hooks.plain": "guard.hooks.plain",
    "hooks.pydantic_ai": "guard.hooks.pydantic_ai",
    "cli_errors": "cli.errors",
    "logs": "cli.logs",
    "check_policy": "cli.check_policy",
    "demo": "cli.demo",
    "_demo_world": "cli.demo_world",
    "init_command": "cli.init",
    "_build": "cli.build",
    "replay.command": "cli.replay",
    "scoring.command": "cli.score",
    "receiver.command": "cli.serve",
    "scoring.case_file": "scoring.cases.schema",
    "scoring.evalset": "scoring.cases.evalset",
    "scoring.errors": "scoring.cases.errors",
    "scoring.references": "scoring.cases.references",
    "scoring.arguments": "scoring.cases.arguments",
    "scoring.overview": "scoring.report.overview",
    "scoring.formats": "scoring.report.formats",
    "scoring.compare": "scoring.report.compare",
    "scoring.html": "scoring.report.html",
    "scoring.html_compare": "scoring.report.html_compare",
    "scoring.charts": "scoring.report.charts",
    "replay.decode": "replay.formats.decode",
    "replay.otlp_json": "replay.formats.otlp_json",
    "replay.typed_json": "replay.formats.typed_json",
    "replay.sdk_json": "replay.formats.sdk_json",
    "replay.protobuf": "replay.formats.protobuf",
    "replay.native": "replay.formats.native",
    "replay.wire": "replay.formats.wire",
    "replay.wire_format": "replay.formats.wire_format",
    "replay.values": "replay.formats.values",
    # serve's listeners, moved into a sub-package of their own (the receiver had 14 modules)
    "receiver.otlp_http": "receiver.listeners.otlp_http",
    "receiver.otlp_grpc": "receiver.listeners.otlp_grpc",
    "receiver.ops": "receiver.listeners.ops",
    "receiver.connections": "receiver.listeners.connections",
    "receiver.eventloop": "receiver.listeners.eventloop",
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path (one module object under both names)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # imported already, at its new path


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds ``otel_agenteval.<old path>`` for the paths in :data:`MOVED`, and nothing else."""

    PREFIX: Final = "otel_agenteval."

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.PREFIX):
            return None
        old = fullname[len(self.PREFIX):]
        new = MOVED.get(old)
        if new is None and old.split(".")[0] == "hooks":
            new = "guard." + old
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(self.PREFIX + new))


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
