"""``@guarded("issue_refund")``: a hand-written tool (sync or async) asked of the guard first.

>>> @guarded("issue_refund")  # the processor's guard (processor.guard()), or guard=...
... def issue_refund(order_id: str, amount: float) -> str: ...

The call's arguments, bound to the function's signature (defaults filled in), are what the
rules see. If no tool span is open for the call, the decorator opens one (``execute_tool
issue_refund``, GenAI semconv, arguments on it) so the processor records the call as a step:
the decision and the outcome then sit on one span. A stopped call returns
:attr:`Decision.reason` instead of running, or raises :class:`ActionBlocked` with
``on_block="raise"``.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from opentelemetry import trace

from ...reading import semconv as sc
from ..decision import ActionBlocked, Decision
from ..guard import Guard, default_guard

F = TypeVar("F", bound=Callable[..., Any])
OnBlock = Literal["result", "raise"]
_TRACER = "otel_agenteval.guard"


def guarded(tool: str, *, guard: Guard | None = None, on_block: OnBlock = "result", record_result: bool = True,
            tracer_provider: trace.TracerProvider | None = None) -> Callable[[F], F]:
    """Decorate a tool function: the guard decides each call before the body runs.

    ``guard``: default, the first one a processor built (:func:`~otel_agenteval.guard.guard.default_guard`).
    ``record_result``: put the result on the tool span the decorator opens (rules such as
    ``conditional_forbidden`` read earlier results; off, they cannot)."""
    tracer = trace.get_tracer(_TRACER, tracer_provider=tracer_provider)

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn)

        def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return dict(bound.arguments)

        def blocked(decision: Decision) -> Any:
            if on_block == "raise":
                raise ActionBlocked(decision)
            return decision.reason

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                call = arguments(args, kwargs)
                with _tool_span(tracer, tool, call) as span:
                    decision = (guard or default_guard()).check(tool, call)
                    if not decision.allowed:
                        return blocked(decision)
                    result = await fn(*args, **kwargs)
                    _done(span, result, record_result)
                    return result

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            call = arguments(args, kwargs)
            with _tool_span(tracer, tool, call) as span:
                decision = (guard or default_guard()).check(tool, call)
                if not decision.allowed:
                    return blocked(decision)
                result = fn(*args, **kwargs)
                _done(span, result, record_result)
                return result

        return run  # type: ignore[return-value]

    return wrap


@contextmanager
def _tool_span(tracer: trace.Tracer, tool: str, call: dict[str, Any]) -> Iterator[Any]:
    """The call's tool span: the one open for it already, else a new ``execute_tool`` span."""
    current = trace.get_current_span()
    attrs = getattr(current, "attributes", None) or {}
    if (attrs.get(sc.OPERATION_NAME) == sc.OP_EXECUTE_TOOL or attrs.get(sc.OI_SPAN_KIND) == sc.OI_TOOL) and (
            attrs.get(sc.TOOL_NAME, attrs.get(sc.OI_TOOL_NAME)) in (None, tool)):
        yield None  # the framework's own span: it records the outcome
        return
    with tracer.start_as_current_span(f"{sc.OP_EXECUTE_TOOL} {tool}", attributes={
            sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.TOOL_NAME: tool,
            sc.TOOL_CALL_ARGUMENTS: _json(call)}) as span:
        yield span  # an exception marks it failed (the SDK's default); a stopped call is marked blocked


def _done(span: Any, result: Any, record: bool) -> None:
    """The result on the span; whatever it is, the call ran and ends as having run (never raises)."""
    if span is not None and record and result is not None:
        span.set_attribute(sc.TOOL_CALL_RESULT, result if isinstance(result, str) else _json(result))


def _json(value: Any) -> str:
    """``value`` as JSON for a span; one that cannot be (a circular dict, a ``__str__`` that raises)
    is named by its type instead: the hook never raises on its own account."""
    try:
        return json.dumps(value, default=str)
    except Exception:  # noqa: BLE001 - ValueError (circular), RecursionError, a raising __str__
        return f"<not JSON: {type(value).__name__}>"


__all__ = ["guarded"]
