"""Framework hooks for the guard (:mod:`otel_agenteval.guard`): a few lines each for the user.

``plain.guarded`` for hand-written tools; ``pydantic_ai``, ``openai_agents`` and ``langgraph``
for those frameworks (each imports its framework only when imported itself). When a call is
stopped the agent gets a tool result that says why, unless ``on_block="raise"``.
"""
