"""Captured message content, read lazily and only by rules that need it.

Three shapes: ``gen_ai.input.messages`` (JSON: role + parts, or role + content), span events
``gen_ai.user.message`` / ``gen_ai.assistant.message`` (content JSON ``[{"text": …}]`` or text),
and OpenInference's flattened ``llm.input_messages.N.message.role/content``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ..model.patterns import PolicyPattern
from . import semconv as sc


@dataclass(frozen=True, slots=True)
class Message:
    role: str  # system | user | assistant | tool
    text: str  # the text parts joined; "" for a turn that is only tool calls/results


def _text_of_parts(parts: Any) -> tuple[str, bool]:
    """Text of a parts list; and whether it held only tool calls/results (not a human turn)."""
    texts: list[str] = []
    tool_only = bool(parts)
    for part in parts if isinstance(parts, list) else [parts]:
        if isinstance(part, str):
            texts.append(part)
            tool_only = False
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in ("tool_call", "tool_call_response", "function_call", "function_call_output"):
                continue
            if "toolResult" in part or "toolUse" in part:
                continue
            tool_only = False
            for key in ("content", "text"):
                if isinstance(part.get(key), str):
                    texts.append(part[key])
                    break
    return "\n".join(texts), tool_only


def _from_json_messages(raw: Any) -> list[Message]:
    data = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(data, list):
        return []
    out: list[Message] = []
    for m in data:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role", ""))
        if "parts" in m:
            text, tool_only = _text_of_parts(m["parts"])
        else:
            content = m.get("content")
            if isinstance(content, str):
                text, tool_only = content, False
            else:
                text, tool_only = _text_of_parts(content)
        if tool_only:
            role = "tool"
        out.append(Message(role, text))
    return out


def _event_text(value: Any) -> str:
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:
            return value
        if isinstance(data, list):
            return _text_of_parts(data)[0]
        if isinstance(data, dict):
            return _text_of_parts([data])[0]
        return str(data)
    return "" if value is None else str(value)


_OI_ROLE = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|content)$")


def messages_of(span: Any) -> list[Message] | None:
    """The input messages of a model-call span, in order; ``None`` if content was not captured."""
    attrs = span.attributes or {}
    raw = attrs.get(sc.INPUT_MESSAGES)
    if raw is not None:
        try:
            return _from_json_messages(raw)
        except ValueError:
            return None
    if any(k.startswith(sc.OI_INPUT_MESSAGES_PREFIX) for k in attrs):
        rows: dict[int, dict[str, str]] = {}
        for k, v in attrs.items():
            m = _OI_ROLE.match(k)
            if m:
                rows.setdefault(int(m[1]), {})[m[2]] = str(v)
        return [Message(r.get("role", ""), r.get("content", "")) for _, r in sorted(rows.items())]
    events = [e for e in span.events or () if e.name in (sc.EVENT_USER_MESSAGE, sc.EVENT_ASSISTANT_MESSAGE)]
    if events:
        return [Message("user" if e.name == sc.EVENT_USER_MESSAGE else "assistant",
                        _event_text((e.attributes or {}).get(sc.EVENT_ATTR_CONTENT))) for e in events]
    return None


class Read:
    """The input messages of one model call, with the JSON text they were parsed from (if any)."""

    __slots__ = ("messages", "raw")

    def __init__(self, messages: list[Message], raw: str | None) -> None:
        self.messages = messages
        self.raw = raw


def messages_after(span: Any, earlier: Read | None) -> Read | None:
    """:func:`messages_of`, parsing only what follows ``earlier`` when this call's JSON text
    repeats it (each model call of a run resends the previous one's messages, then new ones)."""
    raw = (span.attributes or {}).get(sc.INPUT_MESSAGES)
    if not isinstance(raw, str):
        msgs = messages_of(span)
        return Read(msgs, None) if msgs is not None else None
    try:
        msgs = _extending(raw, earlier) if earlier is not None and earlier.raw is not None else None
        if msgs is None:
            msgs = _from_json_messages(raw)
    except ValueError:
        return None
    return Read(msgs, raw)


def _extending(raw: str, earlier: Read) -> list[Message] | None:
    """The messages of ``raw`` when it is ``earlier``'s array with elements appended; else ``None``.
    (A JSON array's elements are self-delimited: the repeated ones parse as they did.)"""
    head = (earlier.raw or "").rstrip()
    if len(head) < 2 or not head.endswith("]") or not raw.startswith(head[:-1]):
        return None
    tail = raw[len(head) - 1:].lstrip()
    if tail.startswith("]"):
        return list(earlier.messages) if not tail[1:].strip() else None
    if not tail.startswith(","):
        return None
    return earlier.messages + _from_json_messages("[" + tail[1:])


def is_affirmative(text: str, affirm: PolicyPattern, deny: PolicyPattern) -> bool:
    return bool(affirm.search(text)) and not deny.search(text)


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def shows_value(value: Any, text: str) -> bool:
    """Whether a message shows an argument value: numbers by value, strings case-insensitively."""
    if value is None or isinstance(value, (dict, list)):
        return True  # structured values are not expected in prose
    if isinstance(value, bool):
        return str(value).lower() in text.lower()
    if isinstance(value, (int, float)) or _decimal(str(value)) is not None and _NUMBER.fullmatch(str(value)):
        want = _decimal(str(value))
        if want is not None:
            return any(_decimal(n) == want for n in _NUMBER.findall(text))
    needle = " ".join(str(value).split()).lower()
    return needle in " ".join(text.split()).lower()
