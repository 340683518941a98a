"""The product's own log lines (a violation, an inferred write, an internal error): through
structlog as the app configured it; to stderr when the app configured nothing. structlog's
default prints to stdout, which belongs to the app (and to the commands' data: JSON, tables)."""

from __future__ import annotations

import sys
from typing import Any

import structlog


class ProductLog:
    """``log.warning(event, **fields)`` and the rest of structlog's methods, routed at each call
    (an app may configure structlog after importing this package)."""

    __slots__ = ("_name",)

    def __init__(self, name: str = "otel_agenteval") -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        if structlog.is_configured():
            return getattr(structlog.get_logger(self._name), method)
        return getattr(structlog.wrap_logger(structlog.PrintLogger(sys.stderr)), method)


def product_log() -> Any:
    """The product's logger (typed ``Any``, as ``structlog.get_logger`` is)."""
    return ProductLog()


__all__ = ["ProductLog", "product_log"]
