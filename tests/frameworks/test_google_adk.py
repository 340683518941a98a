"""Google ADK 2.13 (its own OTel spans, and with openinference-instrumentation-google-adk), offline.

Runs in the ``google-adk`` environment (google-adk pins opentelemetry-sdk<=1.44): each mode's
driver runs in a process of its own; its live figures and the replay of its spans must both be
the scenario's. By default ADK records no tool arguments: the duplicate cannot be seen, and
``agenteval_unchecked_calls_total`` says so for both create_claim calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fw_envs import require, run_driver
from scenario import expected, plain, replayed

MODES: dict[str, dict[str, Any]] = {
    "default": {"arguments": False},
    "content": {},
    "schema1": {},
    # openinference-instrumentation-google-adk 1.0.5 suppresses ADK 2.13's generate_content spans,
    # and the call_llm span it makes instead never starts with this ADK: no model calls are seen
    "openinference": {"llm_calls": 0, "tokens": (0, 0)},
}


@pytest.mark.parametrize("mode", MODES)
def test_google_adk(mode: str, tmp_path: Path) -> None:
    require("google-adk", "google.adk", *(["openinference.instrumentation.google_adk"] if mode == "openinference"
                                          else []))
    live, spans = run_driver("drive_google_adk.py", mode, tmp_path, f"google-adk-2.13.0_{mode}.json")
    want = plain(expected(**MODES[mode]))
    assert live == want
    assert plain(replayed(spans)) == want
