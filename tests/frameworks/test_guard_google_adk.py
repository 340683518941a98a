"""The guard in Google ADK 2.13 (``guard_tool_call``, a ``before_tool_callback``), offline, in the
``google-adk`` environment: the duplicate claim, the out-of-scope tool and the unconfirmed
refund do not run, the model gets a result that says why, the decision sits on ADK's own
``execute_tool`` span, and the processor counts them as blocked, not as steps or violations."""

from __future__ import annotations

from pathlib import Path

import pytest
from fw_envs import require, run_driver
from guard_scenario import expected


@pytest.mark.parametrize("mode", ["content", "schema1"])
def test_guard_callback_stops_calls_before_they_run(mode: str, tmp_path: Path) -> None:
    require("google-adk", "google.adk")
    live, _ = run_driver("drive_guard_google_adk.py", mode, tmp_path)
    assert live == expected(on_tool_span=True)
