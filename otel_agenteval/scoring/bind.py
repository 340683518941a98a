"""Which case a recorded run belongs to: a root-span attribute, or a trace id -> case id file.

Root attributes: ``agenteval.case.id`` (or, for agentevals users, ``agentevals.eval.case.id``)
and ``agenteval.trial``. The mapping file wins over attributes when both name a case.
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
    attrs = t.root_attributes or {}
    cid = attrs.get(sc.AE_CASE_ID) or attrs.get(sc.AGENTEVALS_CASE_ID)
    return str(cid) if cid not in (None, "") else None


def trial_of(t: Trajectory) -> int | None:
    value = (t.root_attributes or {}).get(sc.AE_TRIAL)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


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
