"""Every span attribute name and enum value this package reads, in one place.

Two families: OTel GenAI semantic conventions (``gen_ai.*``) and OpenInference
(``openinference.span.kind``, ``tool.*``, ``llm.*``, ``input.value``), plus the few
framework-specific names (pydantic-ai, Strands, LangChain) that carry the same facts.
"""

from __future__ import annotations

# --- GenAI semantic conventions -------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"
OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"
OP_CREATE_AGENT = "create_agent"
OP_CHAT = "chat"
OP_TEXT_COMPLETION = "text_completion"
OP_GENERATE_CONTENT = "generate_content"
OP_EMBEDDINGS = "embeddings"
LLM_OPERATIONS = frozenset({OP_CHAT, OP_TEXT_COMPLETION, OP_GENERATE_CONTENT})

AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
TOOL_STATUS = "gen_ai.tool.status"  # Strands: success | error
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"  # older name; Strands repeats it
USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
AGG_INPUT_TOKENS = "gen_ai.aggregated_usage.input_tokens"  # pydantic-ai, on the agent span
AGG_OUTPUT_TOKENS = "gen_ai.aggregated_usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

# Span events that carry content (Strands default mode, older GenAI semconv).
EVENT_TOOL_MESSAGE = "gen_ai.tool.message"
EVENT_CHOICE = "gen_ai.choice"
EVENT_USER_MESSAGE = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE = "gen_ai.assistant.message"
EVENT_EXCEPTION = "exception"
EVENT_ATTR_CONTENT = "content"
EVENT_ATTR_MESSAGE = "message"

# Span-name prefixes, the fallback when attributes are missing (never used alone for tools
# unless the attribute set agrees).
NAME_EXECUTE_TOOL = "execute_tool "
NAME_INVOKE_AGENT = "invoke_agent"
NAME_LEGACY_TOOL = "running tool"  # pydantic-ai instrumentation version 2
NAME_LEGACY_AGENT = "agent run"
LEGACY_TOOL_ARGUMENTS = "tool_arguments"
LEGACY_TOOL_RESPONSE = "tool_response"
LEGACY_AGENT_NAME = "agent_name"

# --- OpenInference ------------------------------------------------------------------------
OI_SPAN_KIND = "openinference.span.kind"
OI_TOOL = "TOOL"
OI_LLM = "LLM"
OI_AGENT = "AGENT"
OI_CHAIN = "CHAIN"
OI_TOOL_NAME = "tool.name"
OI_AGENT_NAME = "agent.name"
OI_INPUT_VALUE = "input.value"
OI_OUTPUT_VALUE = "output.value"
OI_MODEL_NAME = "llm.model_name"
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_SESSION_ID = "session.id"
OI_INPUT_MESSAGES_PREFIX = "llm.input_messages."

# --- Resource ------------------------------------------------------------------------------
SERVICE_NAME = "service.name"

# --- This project's own attributes (set by the app or an external checker) ------------------
AE_OUTCOME = "agenteval.outcome"  # success | failure, on the root span
AE_APPROVED = "agenteval.approved"
AE_CASE_ID = "agenteval.case.id"
AE_TRIAL = "agenteval.trial"
AE_CONFIRMATION_SPAN = "agenteval.confirmation"
AE_CONFIRMATION_TOOL = "agenteval.confirmation.tool"
AE_CONFIRMATION_ARGUMENTS = "agenteval.confirmation.arguments"
AGENTEVALS_CASE_ID = "agentevals.eval.case.id"  # migration: agentevals / Google ADK
