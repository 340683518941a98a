"""The error a cases file (ours, or an imported EvalSet) raises: every problem with its path and line."""

from __future__ import annotations

from ...policy.config_file import ConfigError


class CasesError(ConfigError):
    what = "invalid cases file"
    max_bytes = 64 << 20  # a cases file may hold many recorded runs
