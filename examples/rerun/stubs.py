"""Stub answers for ``rerun --on-divergence stub``: a call the recording cannot answer gets these.

A function named after the tool gets its arguments; ``default`` answers every other tool.
Nothing here touches a real system: a stub is a fixture.
"""

from __future__ import annotations

from typing import Any


def ask_user_confirmation(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"confirmed": True}


def default(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "tool": tool}
