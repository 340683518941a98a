"""The policy: which tools write, what each agent may use, confirmations, prices, limits, the guard's
section; a config file's errors with their lines; the starter policy ``init`` writes.

Stage 2 of 6: imports ``model`` only. ``otel_agenteval.policy`` keeps the names users import.
"""

from .policy import *  # noqa: F403 (the public names, listed in policy.py's __all__)
from .policy import __all__ as __all__
