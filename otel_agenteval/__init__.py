"""otel-agenteval: trajectory checks and metrics for AI agents, as an OpenTelemetry span processor.

The house, by stage (each imports only the ones before it; docs/architecture.md draws it):
``model`` → ``policy`` → ``reading`` → ``rules`` → ``engine`` → ``metrics``, then the front doors:
``guard``, ``processor`` (and ``zero_code``), ``replay``, ``scoring``, ``receiver``, ``cli``.
"""

from .guard import ActionBlocked, Decision, Guard
from .model.trajectory import LLMCall, ToolStep, Trajectory
from .model.violation import Violation
from .policy import Policy, PolicyError
from .processor import TrajectoryProcessor
from .reading.confirmations import record_confirmation
from .rules import Check, Finish, Rule

__version__ = "0.1.0"

__all__ = [
    "ActionBlocked",
    "Check",
    "Decision",
    "Finish",
    "Guard",
    "LLMCall",
    "Policy",
    "PolicyError",
    "Rule",
    "ToolStep",
    "Trajectory",
    "TrajectoryProcessor",
    "Violation",
    "__version__",
    "record_confirmation",
]
