"""What each agent framework writes where: one table of facts, read by the extractor, the tool
steps, the blind-spot warnings and the unread-span count.

Frameworks that follow the GenAI semantic conventions or OpenInference need nothing here; the
rest name the same facts their own way (the Vercel AI SDK's ``ai.*``, OpenLLMetry's
``traceloop.*``, Haystack's ``haystack.*``), wrap a call's arguments in an envelope of their own,
or make spans that look like a step and are not one (DSPy ReAct's ``finish``, LlamaIndex's
``_prepare_chat_with_tools``). Each fact is a row below, not a branch in the code that reads it.
"""

from __future__ import annotations

from typing import Any, Final

from . import semconv as sc
from .span_values import json_object

TOOL: Final = "tool"
LLM: Final = "llm"
AGENT: Final = "agent"

# A framework's own operation attribute -> its values that are a step, a model call or an agent run
# (values not listed are structure: walked through).
OPERATION_KINDS: Final[dict[str, dict[str, str]]] = {
    sc.AI_OPERATION_ID: {  # Vercel AI SDK
        "ai.toolCall": TOOL,
        "ai.generateText.doGenerate": LLM, "ai.streamText.doStream": LLM,
        "ai.generateObject.doGenerate": LLM, "ai.streamObject.doStream": LLM,
        "ai.generateText": AGENT, "ai.streamText": AGENT,
    },
    sc.TRACELOOP_SPAN_KIND: {"tool": TOOL, "agent": AGENT},  # traceloop-sdk @tool / @agent
    sc.LANGFUSE_TYPE: {"tool": TOOL, "generation": LLM, "agent": AGENT},  # Langfuse @observe(as_type=...)
}
# Spans named for what they are, with no kind attribute (Haystack's tracer).
SPAN_NAME_KINDS: Final[dict[str, str]] = {
    "haystack.agent.step.tool": TOOL,
    "haystack.agent.step.llm": LLM,
}

# Where each fact may be, first found wins (GenAI semconv and OpenInference first).
TOOL_NAME_KEYS: Final = (sc.TOOL_NAME, sc.OI_TOOL_NAME, sc.AI_TOOL_NAME, sc.HAYSTACK_TOOL_NAME,
                         sc.TRACELOOP_ENTITY_NAME)
ARGUMENT_KEYS: Final = (sc.AI_TOOL_ARGS, sc.TRACELOOP_ENTITY_INPUT, sc.HAYSTACK_TOOL_INPUT,
                        sc.LANGFUSE_INPUT)  # after semconv's own
RESULT_KEYS: Final = (sc.AI_TOOL_RESULT, sc.TRACELOOP_ENTITY_OUTPUT, sc.HAYSTACK_TOOL_OUTPUT, sc.LANGFUSE_OUTPUT)
CALL_ID_KEYS: Final = (sc.TOOL_CALL_ID, sc.AI_TOOL_CALL_ID)
AGENT_NAME_KEYS: Final = (sc.AGENT_NAME, sc.OI_AGENT_NAME, sc.LEGACY_AGENT_NAME, sc.AI_FUNCTION_ID)
ERROR_FLAGS: Final = (sc.HAYSTACK_TOOL_ERROR,)  # true: the tool call failed (its span's status is left UNSET)
# A root span whose name is the agent's when nothing in the run states one: (key, what its value holds).
# LangGraph.js + OpenInference: the graph's root CHAIN span, named createReactAgent(name=...).
AGENT_ROOT_MARKERS: Final = (("metadata", '"ls_integration":"langgraph"'),)

# Tool names that are a tool class, not the tool (OpenLLMetry-JS, LangChain.js): the call's own name is read.
TOOL_CLASS_NAMES: Final = frozenset({"DynamicStructuredTool", "DynamicTool", "StructuredTool"})
# Tool spans that are a framework's own machinery, not the model's choice of a tool.
INTERNAL_TOOL_SPANS: Final = frozenset({
    sc.SMOLAGENTS_FINAL_ANSWER_SPAN,  # smolagents' closing final_answer
    "finish.__call__",  # DSPy ReAct's built-in finish
})
# Suffixes a framework adds to a tool span's name when it records no tool name (DSPy: ``<tool>.__call__``).
TOOL_SPAN_SUFFIXES: Final = (".__call__",)
# Model-kind spans that are a framework preparing a call, not a call (LlamaIndex).
NOT_MODEL_CALL_SUFFIXES: Final = ("._prepare_chat_with_tools",)

# Argument envelopes: LangChain's callback (its arguments under "inputs", marked by "input_str"), and
# a call's {"args", "kwargs"} (smolagents, traceloop-sdk, LlamaIndex, DSPy)
LANGCHAIN_CALLBACK_KEYS: Final = frozenset({"input_str", "tags", "metadata", "inputs", "kwargs"})
CALL_KEYS: Final = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
ENVELOPE_PREFIXES: Final = ('{"input_str":', '{"args":', '{"kwargs":')

# Spans that look like agent work and are understood as structure (not counted as unread).
KNOWN_NON_STEP_NAMES: Final = frozenset({
    "raw_gen_ai_request",  # LiteLLM: the provider request under its model-call span
    "haystack.pipeline.run", "haystack.agent.run", "haystack.agent.step",
    "call_llm",  # Google ADK: its wrapper around the model call's own span
    "execute_agent_loop_cycle",  # Strands TypeScript: one turn of its loop (no operation name, as in Python)
    sc.AE_GUARD_SPAN,  # the guard's record of a call it stopped with no tool span open: not a step
})
# Attributes that mark a framework's own bookkeeping spans (AG2's record_usage repeats its chat span's usage).
KNOWN_NON_STEP_KEYS: Final = ("ag2.span.type",)
KNOWN_NON_STEP_OPERATIONS: Final = frozenset({sc.OP_CREATE_AGENT, sc.OP_EMBEDDINGS, "invoke_workflow",
                                              "execute_event_loop_cycle", "execute_task", "workflow", "task",
                                              "agent_step", "model_chunk", "model_generation"})  # last 3: Mastra
KNOWN_OI_KINDS: Final = frozenset({sc.OI_CHAIN, "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR",
                                   "PROMPT"})
AGENT_WORK_PREFIXES: Final = ("gen_ai.", "llm.", "ai.", "traceloop.", "haystack.", "openinference.")
# What agent work looks like under any vendor's prefix, in an attribute key's last part: a model
# call's token counts, model name, prompt and completion; a tool call's name beside its input.
LLM_KEY_PARTS: Final = ("token", "usage", "model", "prompt", "completion")
TOOL_INPUT_ENDS: Final = (".input", ".args", ".arguments", "_args", ".parameters")

# The setting that makes a framework record tool arguments: (what tells its spans apart, key or
# key=value, in a tool span's or its run's root's attributes, or the instrumentation scope name's
# start with "scope:"), the framework, the setting (or why there is none).
CAPTURE_SETTINGS: Final[tuple[tuple[str, str, str], ...]] = (
    (sc.ADK_EVENT_ID, "Google ADK 2.x",
     "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (or ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1)"),
    (sc.AF_INVOCATION_DURATION, "Microsoft Agent Framework",
     "ENABLE_SENSITIVE_DATA=true (or enable_instrumentation(enable_sensitive_data=True))"),
    ("gen_ai.agent.call.id", "pydantic-ai", "InstrumentationSettings(include_content=True) (the default)"),
    (f"{sc.GEN_AI_SYSTEM}=autogen", "AutoGen 0.7",
     "no setting: AutoGen's own tool spans never carry arguments (add openinference-instrumentation-autogen-agentchat)"),
    ("sk.available_functions", "Semantic Kernel",
     "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true"),
    ("scope:semantic_kernel", "Semantic Kernel", "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true"),
    (sc.HAYSTACK_TOOL_NAME, "Haystack", "HAYSTACK_CONTENT_TRACING_ENABLED=true"),
    (sc.AI_OPERATION_ID, "Vercel AI SDK", "experimental_telemetry: { recordInputs: true } (the default)"),
    (sc.LANGFUSE_TYPE, "Langfuse",
     "LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED=true (the default; or @observe(capture_input=True))"),
    (sc.TRACELOOP_SPAN_KIND, "OpenLLMetry (traceloop)", "TRACELOOP_TRACE_CONTENT=true (the default)"),
    (sc.OI_SPAN_KIND, "OpenInference", "OPENINFERENCE_HIDE_INPUTS unset (TraceConfig(hide_inputs=False))"),
)
GENERIC_SETTING: Final = ("OpenTelemetry GenAI instrumentation", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY")


def framework_kind(name: str, attrs: dict[str, Any]) -> str | None:
    """The kind of a span that carries neither a GenAI operation nor an OpenInference kind, from
    the table (None: not a step, a model call or an agent run)."""
    for key, kinds in OPERATION_KINDS.items():
        value = attrs.get(key)
        if value is not None:
            return kinds.get(value) if type(value) is str else None
    kind = SPAN_NAME_KINDS.get(name)
    if kind is not None:
        return kind
    if name == sc.HAYSTACK_COMPONENT_SPAN and attrs.get(sc.HAYSTACK_COMPONENT_TYPE) == sc.HAYSTACK_AGENT_COMPONENT:
        return AGENT
    if (sc.USAGE_INPUT_TOKENS in attrs or sc.USAGE_OUTPUT_TOKENS in attrs) and sc.REQUEST_MODEL in attrs:
        # a model call by its shape (Google ADK's call_llm: in JS the call itself; in Python a
        # wrapper around its generate_content span, told apart by the engine as the wrapper ends)
        return None if any(key in attrs for key in KNOWN_NON_STEP_KEYS) else LLM
    return None


def names_agent_by_root(attrs: dict[str, Any]) -> bool:
    """Whether a run's root span is named after its agent (see :data:`AGENT_ROOT_MARKERS`)."""
    for key, marker in AGENT_ROOT_MARKERS:
        value = attrs.get(key)
        if type(value) is str and marker in value:
            return True
    return False


def agent_name_of(attrs: dict[str, Any]) -> str | None:
    """The agent a span names outright, under any framework's name for it."""
    for key in AGENT_NAME_KEYS:
        name = attrs.get(key)
        if name:
            return str(name)
    if attrs.get(sc.HAYSTACK_COMPONENT_TYPE) == sc.HAYSTACK_AGENT_COMPONENT:
        name = attrs.get(sc.HAYSTACK_COMPONENT_NAME)  # Haystack: the Agent component's name in its pipeline
        if name:
            return str(name)
    if attrs.get(sc.TRACELOOP_SPAN_KIND) == "agent":
        name = attrs.get(sc.TRACELOOP_ENTITY_NAME)
        if name:
            return str(name)
    return None


def tool_name_from_span_name(name: str) -> str:
    for suffix in TOOL_SPAN_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def first_of(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            return value
    return None


def usage_in_output(attrs: dict[str, Any]) -> tuple[Any, int, int] | None:
    """(model, input, output tokens) from a model step's usage record or recorded replies, for
    frameworks that put them nowhere else (Langfuse: ``langfuse.observation.usage_details``;
    Haystack: ``haystack.agent.step.llm.output`` = ``{"replies": [{"meta": {"model", "usage":
    {...}}}]}``); None when the span has none."""
    lf = json_object(attrs.get(sc.LANGFUSE_USAGE), "{")
    if lf is not None:  # Langfuse: {"prompt_tokens", "completion_tokens"} or {"input", "output"}
        model = attrs.get(sc.LANGFUSE_MODEL)
        return (model, _count(lf.get("prompt_tokens", lf.get("input", lf.get("input_tokens")))),
                _count(lf.get("completion_tokens", lf.get("output", lf.get("output_tokens")))))
    value = json_object(attrs.get(sc.HAYSTACK_LLM_OUTPUT), "{")
    replies = value.get("replies") if value is not None else None
    if type(replies) is not list:
        return None
    model, inp, out = None, 0, 0
    for reply in replies:
        meta = reply.get("meta") if type(reply) is dict else None
        if type(meta) is not dict:
            continue
        usage = meta.get("usage")
        if type(usage) is not dict:
            continue
        model = model or meta.get("model")
        inp += _count(usage.get("prompt_tokens", usage.get("input_tokens")))
        out += _count(usage.get("completion_tokens", usage.get("output_tokens")))
    return model, inp, out


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def unwrap_arguments(raw: Any) -> Any:
    """A tool's arguments out of the framework's envelope around them (anything else as it is):
    LangChain's callback ``{"input_str", "tags", "metadata", "inputs", "kwargs"}`` -> ``inputs``;
    a call's ``{"args": [...], "kwargs": {...}}`` (smolagents, traceloop-sdk, LlamaIndex, DSPy) ->
    ``kwargs`` (a lone dict positional argument when there are no keywords)."""
    value = json_object(raw, ENVELOPE_PREFIXES)
    if value is None:
        return raw
    keys = value.keys()
    if keys <= LANGCHAIN_CALLBACK_KEYS and "input_str" in value:
        inputs = value.get("inputs")
        return inputs if type(inputs) is dict else raw
    if keys == {"args"}:  # OpenLLMetry-JS: {"args": ["<the arguments as JSON>"]}
        args = value["args"]
        inner = json_object(args[0], "{") if type(args) is list and len(args) == 1 else None
        return inner if inner is not None else raw
    if keys <= CALL_KEYS and "kwargs" in value:
        args, kwargs = value.get("args") or [], value.get("kwargs")
        if type(kwargs) is not dict or type(args) is not list:
            return raw
        if not args:
            return kwargs
        if len(args) == 1 and type(args[0]) is dict and not kwargs:
            return args[0]  # the arguments passed as one dict
        return {"args": args, **kwargs}
    return raw


MAX_KEY_SETS: Final = 1024  # attribute-key sets (span shapes) whose verdict is remembered
_AGENT_KEYS: Final[dict[frozenset[str], bool]] = {}  # key set -> agent_work_keys(key set), decided once


def looks_like_agent_work(name: str, attrs: dict[str, Any]) -> bool:
    """Whether a span the engine did not read carries what agent instrumentation writes, and is
    not structure the table knows (a span counted as unread when this is true). Most such spans
    are the app's own (HTTP, database): their attribute keys are looked at once per key set."""
    if not attrs or name in KNOWN_NON_STEP_NAMES or name in INTERNAL_TOOL_SPANS:
        return False
    op = attrs.get(sc.OPERATION_NAME)
    if op is not None:
        return op not in KNOWN_NON_STEP_OPERATIONS
    oi = attrs.get(sc.OI_SPAN_KIND)
    if oi is not None:
        return oi not in KNOWN_OI_KINDS and oi not in (sc.OI_AGENT, sc.OI_TOOL, sc.OI_LLM)
    if name.startswith("haystack."):
        return False  # Haystack's tracer: pipeline and component spans
    keys = frozenset(attrs)
    found = _AGENT_KEYS.get(keys)
    if found is None:
        found = agent_work_keys(keys)
        if len(_AGENT_KEYS) < MAX_KEY_SETS:
            _AGENT_KEYS[keys] = found
    return found


def agent_work_keys(keys: frozenset[str]) -> bool:
    """Whether a span's attribute keys are what agent instrumentation writes, and not a structure
    span the table knows (a traceloop workflow, an AI SDK call, an AG2 span)."""
    if any(key in keys for key in OPERATION_KINDS) or any(key in keys for key in KNOWN_NON_STEP_KEYS):
        return False
    return any(key.startswith(AGENT_WORK_PREFIXES) for key in keys) or looks_llm_or_tool(keys)


def looks_llm_or_tool(keys: frozenset[str]) -> bool:
    """Agent work by its shape under a prefix nobody has told the table about (``acme.llm.model``,
    ``acme.usage.prompt_tokens``; ``acme.tool.name`` beside ``acme.tool.input``)."""
    named = False
    has_input = False
    for key in keys:
        if "." not in key:
            continue
        last = key.rsplit(".", 1)[1].lower()
        if any(part in last for part in LLM_KEY_PARTS):
            return True
        named = named or last == "name" and "tool" in key
        has_input = has_input or key.endswith(TOOL_INPUT_ENDS)
    return named and has_input


def capture_setting(attributes: dict[str, Any] | None, root_attributes: dict[str, Any] | None = None,
                    scope: str | None = None) -> tuple[str, str]:
    """(framework, the setting that turns argument capture on), told from a tool span's
    attributes, its run's root attributes or its instrumentation scope."""
    for marker, framework, setting in CAPTURE_SETTINGS:
        if marker.startswith("scope:"):
            if scope and scope.startswith(marker[6:]):
                return framework, setting
            continue
        key, _, want = marker.partition("=")
        for attrs in (attributes, root_attributes):
            if attrs and key in attrs and (not want or attrs.get(key) == want):
                return framework, setting
    return GENERIC_SETTING
