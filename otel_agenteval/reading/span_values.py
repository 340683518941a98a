"""Values that frameworks write their own way, read out of span attributes and events: conversation
ids, tool errors in Google ADK's responses, smolagents' wrapped arguments, Strands' event-only
content, agent names in OpenInference and CrewAI span names, LangChain's serialised tool results."""

from __future__ import annotations

import json
from typing import Any

from . import semconv as sc


def is_oi_grouping(attrs: dict[str, Any]) -> bool:
    """An OpenInference AGENT span naming no agent and carrying no input or output groups a run.

    The OpenAI Agents SDK's trace (its workflow) is exported this way, above the real agent span;
    read as an agent it would count a second, empty trajectory for every run.
    """
    return not (attrs.get(sc.OI_AGENT_NAME) or sc.OI_INPUT_VALUE in attrs or sc.OI_OUTPUT_VALUE in attrs)


def name_from_span_name(name: str) -> str | None:
    if name.startswith(sc.NAME_INVOKE_AGENT + " "):
        return name[len(sc.NAME_INVOKE_AGENT) + 1 :].strip() or None
    return None


def oi_agent_from_span_name(name: str) -> str | None:
    """The agent in an OpenInference AGENT span name that ends in a method (``support_agent.run``,
    smolagents; ``support_agent._execute_core``, CrewAI's wrappers)."""
    for suffix in sc.OI_AGENT_NAME_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)].strip() or None
    return None



def error_type_of(attrs: dict[str, Any], events: Any) -> str:
    et = attrs.get(sc.ERROR_TYPE)
    if et:
        return str(et)
    for ev in events or ():
        if ev.name == sc.EVENT_EXCEPTION:
            t = (ev.attributes or {}).get("exception.type")
            if t:
                return str(t).rsplit(".", 1)[-1]
    adk = adk_error(attrs.get(sc.ADK_TOOL_RESPONSE))
    if adk:  # "RuntimeError: policy service unavailable" -> RuntimeError
        head = adk.split(":", 1)[0].strip()
        if head.isidentifier():
            return head.rsplit(".", 1)[-1]
    return "error"


def json_object(text: Any, prefix: str | tuple[str, ...]) -> dict[str, Any] | None:
    """``text`` read as a JSON object when it is a string starting with ``prefix`` (or one of them), else None."""
    if type(text) is not str or not text.startswith(prefix):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if type(value) is dict else None


def adk_error(response: Any) -> str | None:
    """The error of a Google ADK tool response ``{"error": "..."}`` (how ADK 1.x records a tool
    that raised, and what an ``on_tool_error_callback`` returns), else None."""
    value = json_object(response, sc.ADK_ERROR_PREFIX)
    if value is not None and len(value) == 1:
        error = value.get("error")
        if error:
            return str(error)
    return None


def conversation(attrs: dict[str, Any]) -> str | None:
    cid = attrs.get(sc.CONVERSATION_ID) or attrs.get(sc.OI_SESSION_ID)
    return str(cid) if cid else None


def find_event_attr(events: Any, event_name: str, key: str) -> Any:
    for ev in events:
        if ev.name == event_name:
            value = (ev.attributes or {}).get(key)
            if value is not None:
                return value
    return None



def result_text(raw: Any) -> str | None:
    """A tool result as plain text: unwraps ``[{"text": …}]`` and serialised ToolMessages."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return str(raw)
    text = raw.strip()
    if text[:1] not in ("[", "{"):
        return raw
    try:
        value = json.loads(text)
    except ValueError:
        return raw
    if isinstance(value, list) and value and all(isinstance(v, dict) and "text" in v for v in value):
        return "\n".join(str(v["text"]) for v in value)
    if isinstance(value, dict):
        kwargs = value.get("kwargs")
        if value.get("lc") and isinstance(kwargs, dict) and "content" in kwargs:
            return str(kwargs["content"])  # LangChain ToolMessage
        if value.get("type") == "tool" and "content" in value:
            return str(value["content"])
        data = value.get("data")
        if value.get("type") == "tool" and isinstance(data, dict) and "content" in data:
            return str(data["content"])  # LangChain's message_to_dict (OpenInference's LangChain output.value)
    return raw
