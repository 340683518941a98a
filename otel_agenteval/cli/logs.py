"""How a long-running command logs: one JSON object a line on stderr (stdout stays the command's).

``serve`` is an application, so it may configure logging: structlog (the monitor's own log
lines: violations, internal errors) and the standard library's (the servers underneath) both
write JSON to stderr. A field with no value is left out (never ``"tool": null``).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog


def _drop_none(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in [k for k, v in event.items() if v is None]:
        del event[key]
    return event


class _JSONFormatter(logging.Formatter):
    """A standard library record as the same JSON line structlog writes."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"timestamp": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
                                "logger": record.name, "event": record.getMessage()}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def json_to_stderr(level: int = logging.WARNING, stream: TextIO | None = None) -> None:
    """Configure structlog and the standard library's logging: JSON lines on ``stream`` (stderr)."""
    out = stream if stream is not None else sys.stderr
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), _drop_none,
                    structlog.processors.format_exc_info, structlog.processors.JSONRenderer(default=str)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(_JSONFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
