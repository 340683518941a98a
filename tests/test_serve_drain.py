"""A drain that runs out of ``--drain-timeout`` says what it left unchecked: counted, logged with
the number of runs lost, in the ``stopped`` line, and exit 1 (before: 688 of 700 runs lost without
a word)."""

from __future__ import annotations

import json
import os
import signal

from serve_support import post, scrape, serve_process, total, wait_until
from test_serve_input import PB, _body, _spans

SLOW_RULE = '''
import time

def slow(event, check):
    if type(event).__name__.endswith("ToolStep"):
        time.sleep(0.2)
'''


def test_a_drain_that_times_out_counts_and_logs_the_runs_it_lost(tmp_path):
    (tmp_path / "slowrule.py").write_text(SLOW_RULE)
    (tmp_path / "policy.yaml").write_text('custom_rules: ["slowrule:slow"]\n')
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    with serve_process("--policy", str(tmp_path / "policy.yaml"), "--grace", "0", "--drain-timeout", "1",
                       "--no-log-violations", env=env) as (proc, info):
        url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
        for _ in range(4):
            assert post(url, _body(_spans(5)), PB)[0] == 200  # 20 runs, 40 tool steps of 0.2 s each
        wait_until(lambda: total(scrape(info["metrics_port"]), "agenteval_receiver_spans_total",
                                 result="accepted") == 60, what="accepted")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 1
        err = proc.stderr.read()
    stopped = json.loads([line for line in err.splitlines() if '"stopped"' in line][-1])
    assert stopped["drained"] is False
    lost = stopped["lost"]
    assert 10 <= lost["runs"] <= 20 and lost["spans"] >= 2 * lost["runs"], lost
    assert lost["runs"] == lost["queued_traces"] + lost["held_traces"] + lost["open_runs"]
    assert f"{lost['runs']} runs not checked" in err and "--drain-timeout" in err
