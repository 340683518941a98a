"""Google ADK / agentevals ``EvalSet`` JSON as a cases mapping, so their users can point here.

ADK's ``EvalSet``: ``eval_cases[].conversation[].intermediate_data.tool_uses[]`` (``name``,
``args``), in snake_case or camelCase; the older ``.test.json``: a list of
``{query, expected_tool_use: [{tool_name, tool_input}]}``.
"""

from __future__ import annotations

from typing import Any

from .errors import CasesError

ADK_THRESHOLDS = {"argument_accuracy": 0.0}


def _adk_reference(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"order": "exact", "args_match": "exact", "required": calls}


def _get(d: dict[str, Any], snake: str) -> Any:
    """ADK writes snake_case; its pydantic models also accept camelCase."""
    if snake in d:
        return d[snake]
    head, *rest = snake.split("_")
    return d.get(head + "".join(w.title() for w in rest))


def is_evalset(data: Any) -> bool:
    if isinstance(data, list):  # the older ADK ``.test.json``: a list of queries
        return all(isinstance(x, dict) and "query" in x for x in data)
    return isinstance(data, dict) and _get(data, "eval_cases") is not None


def evalset_to_cases(data: Any, source: str = "<evalset>") -> dict[str, Any]:
    """An ``EvalSet`` as a cases mapping: each invocation's ``tool_uses``, in order, ``exact``.

    ADK's ``tool_trajectory_avg_score`` compares calls by name and arguments with ``==``, in the
    match type's order (EXACT by default): so the required calls take order ``exact``,
    ``args_match: exact``, and no argument-accuracy floor (ADK has none; a call to a reference
    tool with other arguments is judged by the order rule alone). ``score --match in_order``
    / ``any_order`` give IN_ORDER / ANY_ORDER. Cases are capability cases.
    """
    errors: list[str] = []
    cases: list[dict[str, Any]] = []
    if isinstance(data, list):
        for i, item in enumerate(data):
            calls = []
            for j, use in enumerate(item.get("expected_tool_use") or []):
                name = use.get("tool_name") if isinstance(use, dict) else None
                if not name:
                    errors.append(f"{i}.expected_tool_use.{j}: needs tool_name")
                    continue
                calls.append({"tool": name, "args": use.get("tool_input") or {}})
            cases.append({"id": str(item.get("id") or f"case-{i + 1}"), "task": item.get("query"),
                          "reference": _adk_reference(calls), "thresholds": ADK_THRESHOLDS})
    else:
        for i, case in enumerate(_get(data, "eval_cases") or []):
            where = f"eval_cases.{i}"
            if not isinstance(case, dict):
                errors.append(f"{where}: must be an object")
                continue
            case_id = _get(case, "eval_id")
            if not case_id:
                errors.append(f"{where}.eval_id: missing")
                continue
            calls = []
            task = None
            for k, inv in enumerate(_get(case, "conversation") or []):
                if task is None:
                    parts = (_get(inv, "user_content") or {}).get("parts") or []
                    task = " ".join(p.get("text", "") for p in parts if isinstance(p, dict)) or None
                data_ = _get(inv, "intermediate_data") or {}
                for j, use in enumerate(_get(data_, "tool_uses") or []):
                    if not isinstance(use, dict) or not use.get("name"):
                        errors.append(f"{where}.conversation.{k}.intermediate_data.tool_uses.{j}.name: missing")
                        continue
                    calls.append({"tool": use["name"], "args": use.get("args") or {}})
            cases.append({"id": str(case_id), "task": task, "reference": _adk_reference(calls),
                          "thresholds": ADK_THRESHOLDS})
    if errors:
        raise CasesError(source, errors)
    return {"cases": cases}
