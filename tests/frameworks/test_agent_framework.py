"""Microsoft Agent Framework 1.23 (agent-framework-core), offline, in the ``agent-framework``
environment. By default it records no tool arguments (``ENABLE_SENSITIVE_DATA`` turns them on):
the duplicate cannot be seen, and ``agenteval_unchecked_calls_total`` says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fw_envs import require, run_driver
from scenario import expected, plain, replayed

MODES: dict[str, dict[str, Any]] = {"default": {"arguments": False}, "sensitive": {}}


@pytest.mark.parametrize("mode", MODES)
def test_agent_framework(mode: str, tmp_path: Path) -> None:
    require("agent-framework", "agent_framework")
    live, spans = run_driver("drive_agent_framework.py", mode, tmp_path, f"agent-framework-core-1.23.0_{mode}.json")
    want = plain(expected(**MODES[mode]))
    assert live == want
    assert plain(replayed(spans)) == want
