"""The cases file: read (YAML or an ADK ``EvalSet``), checked with each error's path and line, and each
case resolved once for the matcher (its acceptable paths, their calls ready to compare)."""

from .load import *  # noqa: F403 (the names ``otel_agenteval.scoring.cases`` had: load.py's __all__)
from .load import __all__ as __all__
