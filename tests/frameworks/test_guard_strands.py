"""The guard in strands-agents 1.62 (``GuardHooks``, a ``BeforeToolCallEvent`` hook), offline, in
the ``strands`` environment: the duplicate claim, the out-of-scope tool and the unconfirmed
refund are cancelled before they run, the model gets the reason as the tool's result, and the
processor counts them as blocked, not as steps or violations."""

from __future__ import annotations

from pathlib import Path

import pytest
from fw_envs import require, run_driver
from guard_scenario import expected


@pytest.mark.parametrize("mode", ["default", "latest"])
def test_guard_hooks_stop_calls_before_they_run(mode: str, tmp_path: Path) -> None:
    require("strands", "strands")
    live, _ = run_driver("drive_guard_strands.py", mode, tmp_path)
    assert live == expected(on_tool_span=False)
