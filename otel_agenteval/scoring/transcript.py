"""A run's messages, where its agent span captured them; shown as text only with --show-arguments."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..reading import semconv as sc
from ..reading.content import _from_json_messages as json_messages


def messages_of_run(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The run's messages, where its agent span captured them (``gen_ai.input.messages`` then
    ``gen_ai.output.messages``); ``None`` when it did not."""
    if not attrs or (sc.INPUT_MESSAGES not in attrs and sc.OUTPUT_MESSAGES not in attrs):
        return None
    out: list[dict[str, Any]] = []
    for key in (sc.INPUT_MESSAGES, sc.OUTPUT_MESSAGES):
        raw = attrs.get(key)
        if raw is None:
            continue
        try:
            out += [{"role": m.role, "content": m.text} for m in json_messages(raw)]
        except ValueError:
            out.append({"role": "?", "content": f"({key} is not valid JSON)"})
    return out


def hidden(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without their text: who spoke, and how long it was (``--show-arguments`` shows it)."""
    return [{"role": m.get("role"), "chars": len(str(m.get("content") or "")), "hidden": True} for m in messages]
