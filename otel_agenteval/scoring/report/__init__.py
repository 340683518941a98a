"""The report built from scored runs, and its forms: the one-screen summary, the full table, JSON,
Markdown, JUnit, HTML with its charts, and two candidates compared."""

from .document import Runs, build, closest_ids, gate_line, write_json, write_table

__all__ = ["Runs", "build", "closest_ids", "gate_line", "write_json", "write_table"]
