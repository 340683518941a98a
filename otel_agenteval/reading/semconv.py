"""Every span attribute name and enum value this package reads, in one place.

Two families: OTel GenAI semantic conventions (``gen_ai.*``) and OpenInference
(``openinference.span.kind``, ``tool.*``, ``llm.*``, ``input.value``), plus the few
framework-specific names (pydantic-ai, Strands, LangChain, Google ADK, CrewAI, smolagents) that
carry the same facts.
"""

from __future__ import annotations

from typing import Final

# --- GenAI semantic conventions -------------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CREATE_AGENT: Final = "create_agent"
OP_CHAT: Final = "chat"
OP_TEXT_COMPLETION: Final = "text_completion"
OP_GENERATE_CONTENT: Final = "generate_content"
OP_EMBEDDINGS: Final = "embeddings"
LLM_OPERATIONS = frozenset({OP_CHAT, OP_TEXT_COMPLETION, OP_GENERATE_CONTENT})

AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
TOOL_STATUS: Final = "gen_ai.tool.status"  # Strands: success | error
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"  # older name; Strands repeats it
USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
AGG_INPUT_TOKENS: Final = "gen_ai.aggregated_usage.input_tokens"  # pydantic-ai, on the agent span
AGG_OUTPUT_TOKENS: Final = "gen_ai.aggregated_usage.output_tokens"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
ERROR_TYPE: Final = "error.type"

# Span events that carry content (Strands default mode, older GenAI semconv).
EVENT_TOOL_MESSAGE: Final = "gen_ai.tool.message"
EVENT_CHOICE: Final = "gen_ai.choice"
EVENT_USER_MESSAGE: Final = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE: Final = "gen_ai.assistant.message"
EVENT_EXCEPTION: Final = "exception"
EVENT_ATTR_CONTENT: Final = "content"
EVENT_ATTR_MESSAGE: Final = "message"

# Span-name prefixes, the fallback when attributes are missing (never used alone for tools
# unless the attribute set agrees).
NAME_EXECUTE_TOOL: Final = "execute_tool "
NAME_INVOKE_AGENT: Final = "invoke_agent"
NAME_LEGACY_TOOL: Final = "running tool"  # pydantic-ai instrumentation version 2
NAME_LEGACY_AGENT: Final = "agent run"
LEGACY_TOOL_ARGUMENTS: Final = "tool_arguments"
LEGACY_TOOL_RESPONSE: Final = "tool_response"
LEGACY_AGENT_NAME: Final = "agent_name"

# Google ADK's own names (1.x; 2.x with ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1): JSON object strings.
# ADK 1.x marks a tool that raised only here: ``{"error": "RuntimeError: ..."}``, status UNSET.
ADK_TOOL_CALL_ARGS: Final = "gcp.vertex.agent.tool_call_args"
ADK_TOOL_RESPONSE: Final = "gcp.vertex.agent.tool_response"
ADK_EVENT_ID: Final = "gcp.vertex.agent.event_id"  # on every ADK span: tells ADK apart
ADK_ERROR_PREFIX: Final = '{"error":'
AF_INVOCATION_DURATION: Final = "agent_framework.function.invocation.duration"  # Microsoft Agent Framework

# --- OpenInference ------------------------------------------------------------------------
OI_SPAN_KIND: Final = "openinference.span.kind"
OI_TOOL: Final = "TOOL"
OI_LLM: Final = "LLM"
OI_AGENT: Final = "AGENT"
OI_CHAIN: Final = "CHAIN"
OI_TOOL_NAME: Final = "tool.name"
OI_AGENT_NAME: Final = "agent.name"
OI_INPUT_VALUE: Final = "input.value"
OI_OUTPUT_VALUE: Final = "output.value"
OI_MODEL_NAME: Final = "llm.model_name"
OI_PROMPT_TOKENS: Final = "llm.token_count.prompt"
OI_COMPLETION_TOKENS: Final = "llm.token_count.completion"
OI_SESSION_ID: Final = "session.id"
OI_INPUT_MESSAGES_PREFIX: Final = "llm.input_messages."
OI_GRAPH_NODE_ID: Final = "graph.node.id"  # CrewAI: the agent's role, on its AGENT span
OI_HIDE_INPUTS: Final = "OPENINFERENCE_HIDE_INPUTS"  # the instrumentors' setting that drops input.value
CREWAI_TOOL_AGENT_ROLE: Final = "tool.agent_role"  # CrewAI (event listener): the agent, on each tool span
# Suffixes of OpenInference AGENT span names that follow the agent's name: smolagents names its
# root ``<agent>.run``; CrewAI's wrappers ``<role>._execute_core`` (no agent attribute at start).
OI_AGENT_NAME_SUFFIXES: Final = (".run", "._execute_core")
# smolagents closes every run with its own ``final_answer`` tool: the answer, not a step.
SMOLAGENTS_FINAL_ANSWER_SPAN: Final = "FinalAnswerTool"

# --- Frameworks that write the facts under their own names (the table of what each means: frameworks.py)
# Vercel AI SDK (TypeScript): the operation in ai.operationId; the agent in experimental_telemetry.functionId.
AI_OPERATION_ID: Final = "ai.operationId"
AI_FUNCTION_ID: Final = "ai.telemetry.functionId"
AI_TOOL_NAME: Final = "ai.toolCall.name"
AI_TOOL_ARGS: Final = "ai.toolCall.args"
AI_TOOL_RESULT: Final = "ai.toolCall.result"
AI_TOOL_CALL_ID: Final = "ai.toolCall.id"
# OpenLLMetry (traceloop-sdk decorators, its LangChain instrumentation)
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
# Langfuse's OTel SDK (v3+): every fact under langfuse.observation.*
LANGFUSE_TYPE: Final = "langfuse.observation.type"  # generation | tool | agent | span | ...
LANGFUSE_INPUT: Final = "langfuse.observation.input"
LANGFUSE_OUTPUT: Final = "langfuse.observation.output"
LANGFUSE_MODEL: Final = "langfuse.observation.model.name"
LANGFUSE_USAGE: Final = "langfuse.observation.usage_details"  # JSON: prompt/completion or input/output
LANGFUSE_LEVEL: Final = "langfuse.observation.level"  # ERROR on a failed observation
# Haystack's OpenTelemetry tracer: no GenAI attributes; the span names say what a span is.
HAYSTACK_TOOL_NAME: Final = "haystack.tool.name"
HAYSTACK_TOOL_ERROR: Final = "haystack.tool.error"
HAYSTACK_TOOL_INPUT: Final = "haystack.agent.step.tool.input"  # with HAYSTACK_CONTENT_TRACING_ENABLED only
HAYSTACK_TOOL_OUTPUT: Final = "haystack.agent.step.tool.output"
HAYSTACK_LLM_OUTPUT: Final = "haystack.agent.step.llm.output"  # replies[].meta.usage: the tokens (content on)
HAYSTACK_COMPONENT_NAME: Final = "haystack.component.name"
HAYSTACK_COMPONENT_TYPE: Final = "haystack.component.type"
HAYSTACK_AGENT_COMPONENT: Final = "Agent"
HAYSTACK_COMPONENT_SPAN: Final = "haystack.component.run"
GEN_AI_SYSTEM: Final = "gen_ai.system"

# --- Resource ------------------------------------------------------------------------------
SERVICE_NAME: Final = "service.name"

# --- This project's own attributes (set by the app or an external checker) ------------------
AE_OUTCOME: Final = "agenteval.outcome"  # success | failure, on the root span
AE_APPROVED: Final = "agenteval.approved"
AE_CASE_ID: Final = "agenteval.case.id"
AE_TRIAL: Final = "agenteval.trial"
AE_CONFIRMATION_SPAN: Final = "agenteval.confirmation"
AE_CONFIRMATION_TOOL: Final = "agenteval.confirmation.tool"
AE_CONFIRMATION_ARGUMENTS: Final = "agenteval.confirmation.arguments"
# the guard (guard/guard.py): a tool call it stopped, on the tool span (or an agenteval.guard span)
AE_BLOCKED: Final = "agenteval.blocked"  # true: the call did not run; not a step, not a violation
AE_GUARD_RULE: Final = "agenteval.guard.rule"
AE_GUARD_DECISION: Final = "agenteval.guard.decision"  # allowed | blocked | would_block (observe) | needs_approval
AE_GUARD_SPAN: Final = "agenteval.guard"
AGENTEVALS_CASE_ID: Final = "agentevals.eval.case.id"  # migration: agentevals / Google ADK
