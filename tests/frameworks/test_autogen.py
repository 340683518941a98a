"""AutoGen AgentChat 0.7.5, offline, in the ``autogen`` environment (issue 25): its own spans (no
model calls, never arguments: both create_claim calls unchecked), and with
openinference-instrumentation-autogen-agentchat 0.1.22 on top, where each tool call is two nested
tool spans read as one step, and the agent's span ends just after the run's root (replay keeps it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fw_envs import require, run_driver
from scenario import expected, plain, replayed

MODES = {
    "default": ("autogen-agentchat-0.7.5_default.json", {"arguments": False}),
    "openinference": ("autogen-agentchat-0.7.5_openinference-0.1.22.json", {}),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_autogen(mode: str, tmp_path: Path) -> None:
    require("autogen", "autogen_agentchat", "autogen_ext.models.replay", "openinference.instrumentation.autogen_agentchat")
    capture, kwargs = MODES[mode]
    live, spans = run_driver("drive_autogen.py", mode, tmp_path, capture)
    want = plain(expected(llm_calls=0, tokens=(0, 0), **kwargs))
    assert live == want
    assert plain(replayed(spans)) == want
