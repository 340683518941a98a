"""The error a cases file (ours, or an imported EvalSet) raises: every problem with its path and line."""

from __future__ import annotations

from ...policy.config_file import ConfigError


class CasesError(ConfigError):
    what = "invalid cases file"
