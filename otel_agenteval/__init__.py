"""otel-agenteval: trajectory checks and metrics for AI agents, as an OpenTelemetry span processor."""

from .guard.decision import ActionBlocked, Decision
from .guard.guard import Guard
from .model.trajectory import LLMCall, ToolStep, Trajectory
from .model.violation import Violation
from .policy.policy import Policy, PolicyError
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
