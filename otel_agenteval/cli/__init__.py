"""A front door: the ``otel-agenteval`` command line. ``main`` and its exit-code rule, one module
per command (``demo``, ``replay``, ``score``, ``serve``, ``init``, ``check_policy``), serve's JSON log
lines, which build runs.

The top of the house: may import every other package; nothing imports it.
"""

from .main import main

__all__ = ["main"]
