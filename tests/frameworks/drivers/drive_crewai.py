"""CrewAI + openinference-instrumentation-crewai, offline: ``python drive_crewai.py MODE OUT_DIR``.

Modes: ``events`` (``CrewAIInstrumentor().instrument(use_event_listener=True)``: LLM spans with
token counts from CrewAI's events) and ``wrappers`` (the instrumentor's default: agent and tool
spans only; the model call is left to the model library's own instrumentor). The scripted
``BaseLLM`` answers with native tool calls; it reports usage inside ``llm_call_context()`` as
CrewAI's own providers do, and the agent's tool cache is off so the repeated create_claim runs.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

MODE, OUT = sys.argv[1], Path(sys.argv[2])
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["CREWAI_STORAGE_DIR"] = tempfile.mkdtemp(prefix="crewai-", dir=OUT)
os.environ["HOME"] = str(OUT)  # CrewAI writes user settings under the home directory

import scenario as sc  # noqa: E402

run = sc.Run()
from openinference.instrumentation.crewai import CrewAIInstrumentor  # noqa: E402

CrewAIInstrumentor().instrument(tracer_provider=run.provider, use_event_listener=MODE == "events")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.events import crewai_event_bus  # noqa: E402
from crewai.events.types.llm_events import LLMCallType  # noqa: E402
from crewai.llms.base_llm import BaseLLM, llm_call_context  # noqa: E402
from crewai.tools import tool  # noqa: E402


class ScriptedLLM(BaseLLM):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        object.__setattr__(self, "_turn", 0)

    def supports_function_calling(self) -> bool:
        return True

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:
        with llm_call_context():
            n = self._turn
            object.__setattr__(self, "_turn", n + 1)
            self._emit_call_started_event(messages=messages, tools=tools, callbacks=callbacks,
                                          available_functions=available_functions, from_task=from_task,
                                          from_agent=from_agent)
            if n < len(sc.TURNS):
                name, args = sc.TURNS[n]
                answer: Any = [{"id": f"call_{n}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]
            else:
                answer = sc.FINAL_TEXT
            inp, out = sc.usage_of(n)
            usage = {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}
            self._track_token_usage_internal(usage)
            self._emit_call_completed_event(
                response=answer, call_type=LLMCallType.TOOL_CALL if n < len(sc.TURNS) else LLMCallType.LLM_CALL,
                from_task=from_task, from_agent=from_agent, messages=messages, usage=usage,
                finish_reason="tool_calls" if n < len(sc.TURNS) else "stop")
            return answer


def scenario() -> None:
    agent = Agent(role=sc.AGENT, goal="Resolve order claims.", backstory=sc.SYSTEM_PROMPT,
                  llm=ScriptedLLM(model=sc.MODEL), tools=[tool(f.__name__)(f) for f in sc.TOOLS], verbose=False,
                  allow_delegation=False, cache=False)
    task = Task(description=sc.USER_MESSAGE, expected_output="A short confirmation.", agent=agent)
    result = Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
    assert str(result).strip() == sc.FINAL_TEXT, result
    # the event listener ends spans from CrewAI's event handlers, which run on a thread pool: let
    # them finish before the provider shuts down, or the run's root span ends after it ("incomplete")
    assert crewai_event_bus.flush(timeout=30)


sc.drive(run, scenario, OUT)
