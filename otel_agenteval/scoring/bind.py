"""Which case a recorded run belongs to: a span attribute, OTel baggage, or a trace id -> case id file.

Attributes ``agenteval.case.id`` (or, for agentevals users, ``agentevals.eval.case.id``) and
``agenteval.trial``, read from the run's own root span first, then from the spans around it,
nearest first: a framework's agent run inside the app's own span (``with
tracer.start_as_current_span("case", attributes={"agenteval.case.id": ...}): agent.run_sync(...)``)
takes that span's case id, and an ancestor between them that names one wins over the local root;
then from OTel baggage at the run's start (in process). The mapping file wins over all of these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..model.trajectory import Trajectory
from ..reading import semconv as sc


def case_id_of(t: Trajectory, mapping: Mapping[str, str] | None = None) -> str | None:
    """The case a run belongs to: the mapping file first, then root attributes."""
    if mapping:
        cid = mapping.get(t.trace_hex)
        if cid is not None:
            return cid
    for attrs in _around(t):
        cid = attrs.get(sc.AE_CASE_ID) or attrs.get(sc.AGENTEVALS_CASE_ID)
        if cid not in (None, ""):
            return str(cid)
    return None


def trial_of(t: Trajectory) -> int | None:
    """The run's trial number (``agenteval.trial``), from where its case id was read."""
    value = None
    for attrs in _around(t):
        if attrs.get(sc.AE_CASE_ID) or attrs.get(sc.AGENTEVALS_CASE_ID) or sc.AE_TRIAL in attrs:
            value = attrs.get(sc.AE_TRIAL)
            break
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _around(t: Trajectory) -> list[dict[str, Any]]:
    """The run's root attributes, then those around it, nearest first."""
    return [t.root_attributes or {}, *(t.outer_attributes or ())]


class MappingError(ValueError):
    pass


def load_mapping(path: str | Path) -> dict[str, str]:
    """A trace id -> case id mapping: JSON or YAML object, or lines ``TRACE_ID CASE_ID``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise MappingError(f"{p}: cannot read: {exc.strerror or exc}") from None
    data: Any
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    out: dict[str, str] = {}
    if isinstance(data, dict):
        items: Iterable[tuple[Any, Any]] = data.items()
        for k, v in items:
            out[_trace_key(str(k), p, None)] = str(v)
        return out
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.replace(",", " ").split()
        if len(parts) != 2:
            raise MappingError(f"{p}:{n}: expected 'TRACE_ID CASE_ID'")
        out[_trace_key(parts[0], p, n)] = parts[1]
    return out


def _trace_key(text: str, p: Path, line: int | None) -> str:
    t = text.strip().lower()
    try:
        int(t, 16)
    except ValueError:
        where = f"{p}:{line}" if line else str(p)
        raise MappingError(f"{where}: {text!r} is not a hex trace id") from None
    if len(t) > 32:
        where = f"{p}:{line}" if line else str(p)
        raise MappingError(f"{where}: {text!r} is longer than a trace id")
    return t.rjust(32, "0")
