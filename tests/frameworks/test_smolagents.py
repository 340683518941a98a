"""smolagents 1.26 + openinference-instrumentation-smolagents 0.1, offline, in the ``smolagents``
environment: the agent named from its ``<agent>.run`` root span (its tool calls too), arguments
read from the ``kwargs`` smolagents wraps them in, and its closing ``final_answer`` call not a step.
"""

from __future__ import annotations

from pathlib import Path

from fw_envs import require, run_driver
from scenario import expected, plain, replayed


def test_smolagents(tmp_path: Path) -> None:
    require("smolagents", "smolagents", "openinference.instrumentation.smolagents", "openai")
    live, spans = run_driver("drive_smolagents.py", "openinference", tmp_path,
                             "smolagents-1.26.0_openinference-0.1.43.json")
    want = plain(expected())
    assert live == want
    assert plain(replayed(spans)) == want
