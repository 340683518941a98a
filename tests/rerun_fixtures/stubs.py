"""Stub answers for --on-divergence stub."""


def issue_refund(order_id: str, amount: float) -> dict[str, str]:
    return {"refund_id": f"stub-{order_id}"}


def default(tool: str, arguments: dict[str, object]) -> dict[str, str]:
    return {"stub": tool}
