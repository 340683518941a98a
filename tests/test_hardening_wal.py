"""Hardening round 4 (#40), ``serve --wal-dir``: a full disk is recovered from without a restart,
and said so (B4, on a small tmpfs); a zero-filled segment or tail is a torn tail, cut once, with
one log line (B5)."""

from __future__ import annotations

import json
import subprocess
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_support import get, post, scrape, serve_process, total, value, wait_until
from test_serve_input import PB, _body, _spans

from otel_agenteval.receiver.wal import HEADER, Log


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (mounting needs root: skipped otherwise)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {got.stderr.decode(errors='replace').strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_full_disk_refuses_says_so_and_recovers_without_a_restart(small_disk):
    # runs are held 2 s for late spans: until then their segments cannot be dropped
    with serve_process("--wal-dir", str(small_disk / "wal"), "--grace", "2", "--idle-timeout", "2") as (proc, info):
        url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
        ready = f"http://127.0.0.1:{info['metrics_port']}/readyz"
        codes = []
        for _ in range(40):  # ~90 KB a request: the 1 MiB disk fills within a dozen
            codes.append(post(url, _body(_spans(1, attr_len=30_000)), PB)[0])
            if codes[-1] == 429:
                break
        refused_at = time.monotonic()
        assert codes[-1] == 429 and codes.count(200) >= 3, codes
        status, answer = get(ready)
        assert status == 503 and "write-ahead log refusing writes" in answer.decode(), answer
        assert value(scrape(info["metrics_port"]), "agenteval_wal_refusing") == 1  # a scrape's checkpoint frees nothing yet
        # traffic goes on (a retry every 0.2 s): once the played runs' segments are dropped it is taken again
        def taken() -> bool:
            time.sleep(0.2)
            return post(url, _body(_spans(1, attr_len=30_000)), PB)[0] == 200
        wait_until(taken, timeout=15, what="the log to take writes again")
        recovered_s = time.monotonic() - refused_at
        assert get(ready)[0] == 200
        s = scrape(info["metrics_port"])
        assert value(s, "agenteval_wal_refusing") == 0
        assert value(s, "agenteval_wal_refused_spans_total", reason="disk") >= 3
        wait_until(lambda: total(scrape(info["metrics_port"]), "agenteval_receiver_traces_total")
                   >= codes.count(200) + 1, what="every acknowledged run played")
    err = proc.stderr.read() if proc.stderr else ""
    lines = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    said = [x.get("event", "") for x in lines]
    assert sum("disk refused a write" in e for e in said) == 1, said
    assert sum("takes writes again" in e for e in said) == 1, said
    print(f"B4: recovered {recovered_s:.2f}s after the first refusal")  # figure for docs/operations.md
    assert recovered_s < 10


# --- B5: zeros where records should be ---------------------------------------------------------------
def _segment(records: list[bytes]) -> bytes:
    return b"".join(HEADER.pack(1, len(p), zlib.crc32(p)) + p for p in records)


@pytest.mark.parametrize("shape", ["zero tail", "zero segment", "zero tail and a later segment"])
def test_zeros_are_a_torn_tail_cut_once_with_one_log_line(tmp_path, shape, caplog):
    good = _segment([b"first record", b"second record"])
    zeros = bytes(4 << 20)  # a 4 MiB zero tail: 466,033 warning lines and 5 s before
    if shape == "zero tail":
        (tmp_path / "00000001").write_bytes(good + zeros)
        want = (2, "00000001", len(good), len(zeros))
    elif shape == "zero segment":
        (tmp_path / "00000001").write_bytes(good)
        (tmp_path / "00000002").write_bytes(zeros)
        want = (2, "00000002", 0, len(zeros))
    else:
        (tmp_path / "00000001").write_bytes(good + zeros)
        (tmp_path / "00000002").write_bytes(good)
        want = (2, "00000001", len(good), len(zeros) + len(good))
    log = Log(tmp_path)
    t0 = time.monotonic()
    records = list(log.read())
    took = time.monotonic() - t0
    got = (len(records), log.cuts[0].segment, log.cuts[0].offset, log.cuts[0].bytes)
    assert got == want and len(log.cuts) == 1 and log.cuts[0].reason == "zero-filled", (got, log.cuts)
    assert took < 0.5, took
    log.close()
    assert (tmp_path / "00000001").stat().st_size == len(good)
    again = Log(tmp_path)  # cut once: the next start reads it clean
    assert len(list(again.read())) == 2 and again.cuts == []
    again.close()


def test_serve_on_a_zero_tail_starts_fast_with_one_line_about_it(tmp_path):
    wal = tmp_path / "wal"
    wal.mkdir()
    payload = bytes((1, 0)) + _body(_spans(1))  # one logged OTLP/HTTP protobuf request
    (wal / "00000001").write_bytes(_segment([payload]) + bytes(4 << 20))
    t0 = time.monotonic()
    with serve_process("--wal-dir", str(wal)) as (proc, info):
        took = time.monotonic() - t0
    err = proc.stderr.read() if proc.stderr else ""
    assert len(err) < 20_000, f"{len(err)} bytes of stderr"
    summary = next(json.loads(x) for x in err.splitlines() if '"wal_recovered"' in x)
    assert summary["records"] == 1 and summary["cut_bytes"] == 4 << 20, summary
    assert [c["reason"] for c in summary["cuts"]] == ["zero-filled"], summary
    assert took < 8.0, took
