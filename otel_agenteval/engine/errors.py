"""Errors caught inside the monitor (never raised into the host): counted by stage in
``agenteval_processor_errors_total``; the first of each stage is logged with its traceback."""

from __future__ import annotations

import contextlib

from ..model.product_log import product_log

log = product_log()  # structlog as the app set it up; stderr when it did not


def caught(errors: dict[str, int], stage: str) -> None:
    """Count an exception being handled now at ``stage`` (call it from the ``except`` block)."""
    n = errors[stage] = errors.get(stage, 0) + 1
    if n == 1:
        with contextlib.suppress(Exception):  # a broken logger must not break the host either
            log.error("agenteval.internal_error: the first at this stage; later ones are only counted",
                      stage=stage, exc_info=True)
