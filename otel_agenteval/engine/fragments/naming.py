"""A stitched group's trace (:func:`stitched_trace`), where a tool step named only by its tool's class
(LangChain.js' ``DynamicStructuredTool``: its call threw, so no ToolMessage of its own names the tool)
takes the name from the pieces around it: the nearest whose recorded output holds a ToolMessage
answering a call, recorded in that piece's input, with this step's arguments. Only when exactly
one tool name answers and no other tool step of the group claims that call; else it keeps its
class name. Only stitched groups, once, when they are decided: nothing on the span path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ...reading import frameworks as fw
from ...reading import semconv as sc
from ...reading.span_values import json_object
from ...reading.spans import attributes_of
from ...reading.tool_steps import SpanToolStep, tool_name
from .stitched import StitchedSpan


def stitched_trace(held: Sequence[Any], parents: dict[int, int], tid: int) -> list[StitchedSpan]:
    """``held`` (pieces with ``span``, ``tool`` and ``piece``, the outermost first) as one trace
    ``tid``, each under its parent in ``parents``, class-named tool steps named where one can tell."""
    spans = {h.piece.span_id: h.span for h in held}
    unnamed = [h.span for h in held if h.tool and tool_name(h.span) in fw.TOOL_CLASS_NAMES]
    names = {} if not unnamed else _names(unnamed, spans, parents, [h.span for h in held if h.tool])
    return [StitchedSpan(h.span, tid, parents.get(h.piece.span_id), names.get(h.piece.span_id)) for h in held]


def _names(unnamed: list[Any], spans: dict[int, Any], parents: dict[int, int],
           tools: list[Any]) -> dict[int, dict[str, Any]]:
    """Span id -> its attributes with the tool's name, for the class-named steps that can be told."""
    claimed = {cid for span in tools if (cid := _own_call_id(span)) is not None}
    out: dict[int, dict[str, Any]] = {}
    for span in unnamed:
        args = _arguments(span)
        sid = parents.get(span._context[1])
        while sid is not None and args is not None:
            answers = {name for cid, name, call_args in _answered(spans[sid]) if call_args == args
                       and cid not in claimed}
            if answers:
                if len(answers) == 1:
                    out[span._context[1]] = {**attributes_of(span), sc.TOOL_NAME: answers.pop()}
                break
            sid = parents.get(sid)
    return out


def _answered(span: Any) -> Iterator[tuple[str, str, Any]]:
    """(call id, tool name, arguments) of each call recorded in a piece's input that a ToolMessage
    of the same tool in its output answers."""
    attrs = attributes_of(span)
    calls: dict[str, tuple[Any, Any]] = {}
    for kwargs in _messages(fw.first_of(attrs, fw.ARGUMENT_KEYS)):
        for call in kwargs.get("tool_calls") or ():
            if type(call) is dict and type(call.get("id")) is str:
                calls[call["id"]] = (call.get("name"), call.get("args"))
    for kwargs in _messages(fw.first_of(attrs, fw.RESULT_KEYS)):
        cid, name = kwargs.get("tool_call_id"), kwargs.get("name")
        if type(name) is str and name and cid in calls and calls[cid][0] == name:
            yield cid, name, calls[cid][1]


def _messages(raw: Any) -> Iterator[dict[str, Any]]:
    """The ``kwargs`` of each serialised LangChain message in a recorded input or output."""
    value = json_object(raw, "{")
    if value is None:
        return
    listed = value.get("messages")
    for m in listed if type(listed) is list else [value]:
        kwargs = m.get("kwargs") if type(m) is dict else None
        if type(kwargs) is dict:
            yield kwargs


def _own_call_id(span: Any) -> str | None:
    """The call a tool step's own recorded result answers."""
    kwargs = next(_messages(fw.first_of(attributes_of(span), fw.RESULT_KEYS)), None)
    cid = kwargs.get("tool_call_id") if kwargs is not None else None
    return cid if type(cid) is str else None


def _arguments(span: Any) -> Any:
    """A tool step's arguments as a JSON value, as the rules read them (None when it has none)."""
    raw = SpanToolStep("", 0, 0, 0, 0, True, attributes_of(span), span._events).raw_arguments
    if type(raw) is str:
        try:
            return json.loads(raw)
        except ValueError:
            return None
    return raw
