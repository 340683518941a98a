"""CrewAI 1.15 + openinference-instrumentation-crewai 1.1, offline, in the ``crewai`` environment.

The agent is named by ``graph.node.id`` (its role) live and on replay, not after the span
(``support_agent._execute_core``, or the task text with the event listener).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fw_envs import require, run_driver
from scenario import expected, plain, replayed

MODES: dict[str, dict[str, Any]] = {
    "events": {},
    # the instrumentor's wrappers make no LLM span: the model library's instrumentor does that
    "wrappers": {"llm_calls": 0, "tokens": (0, 0)},
}


@pytest.mark.parametrize("mode", MODES)
def test_crewai(mode: str, tmp_path: Path) -> None:
    require("crewai", "crewai", "openinference.instrumentation.crewai")
    live, spans = run_driver("drive_crewai.py", mode, tmp_path, f"crewai-1.15.30_openinference-1.1.21_{mode}.json")
    want = plain(expected(**MODES[mode]))
    assert live == want
    assert plain(replayed(spans)) == want
