"""A front door: the guard, asked about a tool call before it runs (``Guard``, ``Decision``,
``ActionBlocked``), what an allowed call holds while it runs, and the framework hooks (``hooks/``).

Imports the stages (through ``rules`` and ``metrics``); imported by ``processor`` and ``cli``.
"""

from .decision import ActionBlocked, Decision
from .guard import Guard, default_guard

__all__ = ["ActionBlocked", "Decision", "Guard", "default_guard"]
