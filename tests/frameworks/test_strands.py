"""strands-agents 1.62, offline, both of its semconv modes, in the ``strands`` environment
(Strands does not resolve beside the other frameworks of the main environment)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fw_envs import require, run_driver
from scenario import expected, plain, replayed


@pytest.mark.parametrize("mode", ["default", "latest"])
def test_strands(mode: str, tmp_path: Path) -> None:
    require("strands", "strands")
    live, spans = run_driver("drive_strands.py", mode, tmp_path, f"strands-agents-1.62.0_{mode}.json")
    want = plain(expected())
    assert live == want
    assert plain(replayed(spans)) == want
