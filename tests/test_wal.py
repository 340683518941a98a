"""``serve --wal-dir``: the log itself (records, group sync, torn and corrupt tails, bounds), and a
real ``serve`` process killed with SIGKILL and started again on its log."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry
from serve_support import post, scrape, total, value, wait_until
from test_serve_input import PB, _body, _spans
from wal_support import DUPLICATE_POLICY, duplicate_spans

from otel_agenteval.policy.policy import Policy
from otel_agenteval.receiver import ConfigError, Receiver, ServeConfig
from otel_agenteval.receiver.wal import FULL, HEADER, OK, Log


def _segments(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.isdigit())


# --- the log ---------------------------------------------------------------------------------------
def test_records_come_back_in_order_across_segments_once_synced(tmp_path):
    log = Log(tmp_path, sync_s=0.01, segment_bytes=100).start()
    futures = [log.append(1, f"record {i}".encode() * 5, {i}) for i in range(10)]
    assert [f.result(5) for f in futures] == [OK] * 10
    assert log.stats["syncs"] >= 1
    assert len(log.segments) > 3  # rotated past segment_bytes
    log.close()
    again = Log(tmp_path)
    got = [(r.type, r.payload) for r in again.read()]
    assert got == [(1, f"record {i}".encode() * 5) for i in range(10)]
    assert again.cuts == []
    again.close()


def test_an_append_is_acknowledged_with_its_group_at_most_one_sync_per_interval(tmp_path):
    import time

    log = Log(tmp_path, sync_s=0.3).start()
    assert log.append(1, b"first").result(5) == OK  # after a quiet spell: synced at once
    t0 = time.monotonic()
    group = [log.append(1, b"next %d" % i) for i in range(20)]
    assert not any(f.done() for f in group)  # not acknowledged before the sync that covers them
    assert [f.result(5) for f in group] == [OK] * 20
    assert time.monotonic() - t0 >= 0.2
    assert log.stats["syncs"] == 2  # one sync for the whole group
    log.close()


def test_one_process_per_directory(tmp_path):
    log = Log(tmp_path)
    with pytest.raises(ConfigError, match="in use by another serve process"):
        Log(tmp_path)
    log.close()
    Log(tmp_path).close()


def _three_segments(d: Path) -> list[bytes]:
    log = Log(d, segment_bytes=3 * (HEADER.size + 40)).start()
    payloads = [bytes([i]) * 40 for i in range(9)]
    for p in payloads:
        assert log.append(1, p).result(5) == OK
    log.close()
    return payloads


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage", "middle segment flipped"])
def test_a_torn_or_corrupt_tail_is_cut_counted_and_never_fatal(tmp_path, damage):
    payloads = _three_segments(tmp_path)
    segs = _segments(tmp_path)
    assert len(segs) == 4  # three full, and the empty one started last
    last, middle = segs[2], segs[1]
    record = HEADER.size + 40
    if damage == "truncated":  # the last record half written
        os.truncate(last, 2 * record + 20)
        keep, cut = 8, 20
    elif damage == "flipped":  # a flipped byte in the last record's payload: CRC mismatch
        data = bytearray(last.read_bytes())
        data[2 * record + HEADER.size + 5] ^= 0xFF
        last.write_bytes(bytes(data))
        keep, cut = 8, record
    elif damage == "garbage":  # bytes after the last record
        with open(last, "ab") as f:
            f.write(b"\x01\x02\x03")
        keep, cut = 9, 3
    else:  # a middle segment: cut there, later segments removed (their records cannot be trusted)
        data = bytearray(middle.read_bytes())
        data[record + 3] ^= 0x01  # in the second record's length
        middle.write_bytes(bytes(data))
        keep, cut = 4, 2 * record + 3 * record
    log = Log(tmp_path)
    got = [r.payload for r in log.read()]
    assert got == payloads[:keep]
    assert sum(c.bytes for c in log.cuts) == cut
    assert log.cuts[0].reason in {"torn header", "torn record", "CRC mismatch"}
    log.start()  # appends go on after the cut
    assert log.append(1, b"after").result(5) == OK
    log.close()
    again = Log(tmp_path)
    assert [r.payload for r in again.read()] == [*payloads[:keep], b"after"]
    assert again.cuts == []
    again.close()


def test_the_bound_refuses_and_marks_pass_it(tmp_path):
    log = Log(tmp_path, max_bytes=3 * (HEADER.size + 100)).start()
    assert [log.append(1, b"x" * 100).result(5) for _ in range(4)] == [OK, OK, OK, FULL]
    assert log.stats["refused_full"] == 1
    assert log.append(2, b"m" * 16, bounded=False).result(5) == OK
    log.close()


# --- serve in-process: bounds -------------------------------------------------------------------------
def test_a_full_log_is_refused_429_and_resource_exhausted_and_counted(tmp_path):
    cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0, grace_s=30, idle_s=60, log_violations=False,
                      max_body_bytes=4096, wal_dir=str(tmp_path), wal_max_bytes=8192)
    r = Receiver(cfg, registry=CollectorRegistry()).start()
    try:
        body = _body(_spans(1))  # ~700 bytes: the log takes a few
        url = f"http://127.0.0.1:{r.ports.http}/v1/traces"
        codes = [post(url, body, PB)[0] for _ in range(20)]
        assert codes[0] == 200 and codes[-1] == 429
        with grpc.insecure_channel(f"127.0.0.1:{r.ports.grpc}") as ch:
            export = ch.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as err:
                export(body, timeout=10)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        s = scrape(r.ports.metrics)
        refused = value(s, "agenteval_wal_refused_spans_total", reason="full")
        assert refused == (codes.count(429) + 1) * 3
        assert total(s, "agenteval_receiver_spans_total", result="refused") == refused
        assert value(s, "agenteval_wal_bytes") <= 8192
    finally:
        r.stop()


# --- serve as a process: SIGKILL, restart on the log ------------------------------------------------
def _start(args: list[str], **popen):
    cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--grpc-port", "0", "--http-port", "0",
           "--metrics-port", "0", "--no-log-violations", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(f"serve did not start: {proc.stderr.read()}")
    return proc, json.loads(line)


def _recovered(proc) -> dict:
    for line in proc.stderr:
        if '"wal_recovered"' in line:
            return json.loads(line)
    raise AssertionError("no wal_recovered line")


def _counts(port: int) -> tuple[float, float]:
    s = scrape(port)
    return total(s, "agenteval_trajectories_total"), total(s, "agenteval_violations_total", rule="duplicate_write")


@pytest.fixture
def policy_file(tmp_path):
    p = tmp_path / "policy.yaml"
    p.write_text(DUPLICATE_POLICY)
    Policy.from_file(str(p))
    return str(p)


def test_kill_9_loses_no_acknowledged_run_and_counts_a_scraped_one_once(tmp_path, policy_file):
    wal = tmp_path / "wal"
    args = ["--policy", policy_file, "--wal-dir", str(wal), "--grace", "1.5", "--idle-timeout", "60"]
    proc, info = _start(args)
    try:
        url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
        assert post(url, _body(duplicate_spans(10)), PB)[0] == 200
        wait_until(lambda: _counts(info["metrics_port"]) == (10, 10), what="10 runs played and scraped")
        # acknowledged, held for their grace period, never played: only the log has them
        assert post(url, _body(duplicate_spans(7, start=10)), PB)[0] == 200
        proc.kill()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    proc, info = _start(["--policy", policy_file, "--wal-dir", str(wal), "--grace", "0.1", "--idle-timeout", "60"])
    try:
        summary = _recovered(proc)
        assert summary["spans"] == 7 * 4 and summary["traces"] == 7 and summary["cut_bytes"] == 0
        assert summary["played_traces_skipped"] == 10  # scraped before the kill: not played again
        wait_until(lambda: _counts(info["metrics_port"]) == (7, 7), what="7 recovered runs")
        s = scrape(info["metrics_port"])
        assert value(s, "agenteval_wal_recovered_spans_total") == 28
        assert total(s, "agenteval_trajectories_total") == 7  # 10 before + 7 after: 17 runs, each once
        # the first process's segment: its runs all played and scraped, so it is dropped
        wait_until(lambda: [p.name for p in _segments(wal)] == ["00000002"] and bool(scrape(info["metrics_port"])),
                   what="finished segments dropped")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _segments(wal) == []  # a clean stop played everything: nothing left to recover


def test_a_corrupt_tail_after_kill_9_starts_cleanly_and_says_what_was_cut(tmp_path, policy_file):
    wal = tmp_path / "wal"
    args = ["--policy", policy_file, "--wal-dir", str(wal), "--grace", "30", "--idle-timeout", "60"]
    proc, info = _start(args)
    url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
    for i in range(3):
        assert post(url, _body(duplicate_spans(2, start=2 * i)), PB)[0] == 200
    proc.kill()
    proc.wait(10)
    seg = _segments(wal)[-1]
    size = seg.stat().st_size
    os.truncate(seg, size - 10)  # the last request torn
    with open(seg, "r+b") as f:  # and the one before it flipped: cut there
        data = bytearray(f.read())
        third = size // 3  # records are about the same size
        data[third + third // 2] ^= 0x55
        f.seek(0)
        f.write(data)
    proc, info = _start(["--policy", policy_file, "--wal-dir", str(wal), "--grace", "0.1", "--idle-timeout", "60"])
    try:
        summary = _recovered(proc)
        assert summary["cut_bytes"] == size - 10 - summary["cuts"][0]["offset"]
        assert summary["cuts"][0]["reason"] == "CRC mismatch"
        assert summary["traces"] == 2  # the first request, intact
        wait_until(lambda: _counts(info["metrics_port"]) == (2, 2), what="the intact runs")
        assert value(scrape(info["metrics_port"]), "agenteval_wal_cut_bytes_total") == summary["cut_bytes"]
        url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
        assert post(url, _body(duplicate_spans(1, start=50)), PB)[0] == 200
        wait_until(lambda: _counts(info["metrics_port"]) == (3, 3), what="new runs after the cut")
    finally:
        proc.kill()
        proc.wait(10)


def _small_files(limit: int):
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


def test_a_disk_that_refuses_the_write_is_refused_429_and_counted(tmp_path, policy_file):
    wal = tmp_path / "wal"
    # every file this serve writes is capped at 3000 bytes by the kernel: the segment fills like a full disk
    proc, info = _start(["--policy", policy_file, "--wal-dir", str(wal), "--grace", "30"],
                        preexec_fn=_small_files(3000))
    try:
        url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
        body = _body(duplicate_spans(1))
        codes = [post(url, body, PB)[0] for _ in range(8)]
        assert codes[0] == 200 and codes[-1] == 429
        s = scrape(info["metrics_port"])
        assert value(s, "agenteval_wal_refused_spans_total", reason="disk") == codes.count(429) * 4
        assert _segments(wal)[-1].stat().st_size <= 3000  # no partial record left behind
    finally:
        proc.kill()
        proc.wait(10)
    log = Log(wal)
    assert len(list(log.read())) == codes.count(200) and log.cuts == []
    log.close()
