"""Cost: tokens times the policy's price table (USD per million tokens, per model)."""

from __future__ import annotations

from .policy import Policy


def llm_cost(policy: Policy, model: str | None, input_tokens: int, output_tokens: int) -> float:
    price = policy.price_for(model)
    if price is None:
        return 0.0
    return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1e6
