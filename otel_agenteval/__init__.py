"""otel-agenteval: trajectory checks and metrics for AI agents, as an OpenTelemetry span processor."""

from .confirmations import record_confirmation
from .decision import ActionBlocked, Decision
from .guard import Guard
from .policy import Policy, PolicyError
from .processor import TrajectoryProcessor
from .rules import Check, Finish, Rule
from .trajectory import LLMCall, ToolStep, Trajectory
from .violation import Violation

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
