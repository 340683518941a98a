"""Fuzz the C wire reader (``replay/_wire_c.c`` over ``_wire_format.c``) under AddressSanitizer
and UndefinedBehaviorSanitizer, with atheris (libFuzzer for Python).

The two C files are compiled again with clang (``-fsanitize=address,undefined,fuzzer-no-link``:
every memory access checked, undefined behaviour aborts, edges counted for libFuzzer's guidance)
into ``~/.cache/otel-agenteval/fuzz-wire-c/<hash of sources and flags>/``, loaded in a child Python with atheris's
ASan runtime preloaded, configured as the package configures its own build
(``replay.native.reader``), and fed libFuzzer's mutations of a seed corpus:

- real captures: every span of ``tests/frameworks/spans/*.json`` (eleven frameworks' captured
  output), as requests, and pydantic-ai's spans (``pydantic_ai_shape.json``) encoded by the SDK's
  own OTLP exporter;
- malformed bodies: truncated, a length past the end, a wrong wire type, an overlong varint,
  deep nesting, a field given twice, bad UTF-8, ids of the wrong size.

Each input the C reader accepts is also read by protobuf + ``request_spans`` (the reference): the
C reader may give up (None), never return other spans, never accept bytes protobuf refuses. Any
sanitizer report, crash or difference stops the run, exit status non-zero, the input saved.

    .venv/bin/python benchmarks/fuzz_wire_c.py [--seconds 600] [--max-len 65536] [--canary]

``--canary``: instead of fuzzing, a use-after-free through libc's ``memmove`` (which ASan
intercepts), to show the sanitizer is live in the child: it must fail with ASan's report.
The test suite runs a few seconds of this (``tests/test_wire_c_fuzz.py``); benchmarks/README.md
has a long run's figures. Needs clang (``.ci/install-tools.sh``) and atheris (the test extra).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "otel_agenteval" / "replay" / n for n in ("_wire_c.c", "_wire_format.c", "_wire_format.h")]
# compiled with the sanitizers; linked without their runtime (the child preloads atheris's)
FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined,fuzzer-no-link",
         "-fno-sanitize-recover=all", "-fPIC"]
# outside the clone (the plain-build tests run in a copy), keyed by sources, flags, clang and Python
BUILD = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "otel-agenteval" / "fuzz-wire-c"
STATS = ("stat::number_of_executed_units", "stat::average_exec_per_sec", "stat::new_units_added",
         "stat::peak_rss_mb")


def missing() -> str | None:
    """Why the fuzz run cannot run here, or None."""
    if shutil.which("clang") is None:
        return "clang not found (bash .ci/install-tools.sh installs it)"
    try:
        import atheris  # noqa: F401
    except ImportError:
        return "atheris not installed (pip install -e '.[test]')"
    return None


def build() -> Path:
    """The sanitizer build of the reader, made once per source and flag set."""
    key = hashlib.sha256(b"\0".join([*(p.read_bytes() for p in SOURCES), " ".join(FLAGS).encode(),
                                     subprocess.run(["clang", "--version"], capture_output=True).stdout,
                                     sys.version.encode()])).hexdigest()[:16]
    out = BUILD / key / ("_wire_c" + sysconfig.get_config_var("EXT_SUFFIX"))
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        objects = []
        for src in SOURCES[:2]:
            objects.append(str(out.parent / (src.stem + ".o")))
            subprocess.run(["clang", *FLAGS, f"-I{sysconfig.get_paths()['include']}", "-c", str(src), "-o", objects[-1]],
                           check=True)
        tmp = out.with_suffix(".tmp")
        subprocess.run(["clang", "-shared", *objects, "-o", str(tmp)], check=True)
        tmp.replace(out)
    return out


# --- seeds --------------------------------------------------------------------------------------
def _value(v: Any, x: Any) -> None:
    if isinstance(x, bool):
        v.bool_value = x
    elif isinstance(x, int):
        v.int_value = x
    elif isinstance(x, float):
        v.double_value = x
    elif isinstance(x, bytes):
        v.bytes_value = x
    elif isinstance(x, (tuple, list)):
        v.array_value.SetInParent()
        for y in x:
            _value(v.array_value.values.add(), y)
    elif isinstance(x, dict):
        v.kvlist_value.SetInParent()
        for k, y in x.items():
            _value(v.kvlist_value.values.add(key=k).value, y)
    elif x is not None:
        v.string_value = str(x)


def captured_requests() -> list[bytes]:
    """Each framework capture (SDK ``to_json`` spans, read by replay's own reader) as one request."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from otel_agenteval.replay.readers import ReadCounts, iter_batches

    out = []
    for path in sorted((ROOT / "tests" / "frameworks" / "spans").glob("*.json")):
        req = ExportTraceServiceRequest()
        scope = req.resource_spans.add().scope_spans.add()
        for batch in iter_batches([path], counts=ReadCounts()):
            for s in batch:
                span = scope.spans.add(
                    trace_id=s.context.trace_id.to_bytes(16, "big"), span_id=s.context.span_id.to_bytes(8, "big"),
                    name=s.name, kind=s.kind.value + 1, start_time_unix_nano=s.start_time or 0,
                    end_time_unix_nano=s.end_time or 0)
                if s.parent is not None:
                    span.parent_span_id = s.parent.span_id.to_bytes(8, "big")
                for k, x in (s.attributes or {}).items():
                    _value(span.attributes.add(key=k).value, x)
                for e in s.events:
                    ev = span.events.add(name=e.name, time_unix_nano=e.timestamp)
                    for k, x in (e.attributes or {}).items():
                        _value(ev.attributes.add(key=k).value, x)
                span.status.code = s.status.status_code.value
                if s.status.description:
                    span.status.message = s.status.description
        for k, x in (batch[0].resource.attributes if batch else {}).items():
            _value(req.resource_spans[0].resource.attributes.add(key=k).value, x)
        out.append(req.SerializeToString())
    return out


def sdk_requests() -> list[bytes]:
    """pydantic-ai's spans (every attribute, the retried tool's exception) as the SDK's exporter encodes them."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from serve_throughput import record, requests_of

    spans = record("pydantic-ai", 8)
    return [r.SerializeToString() for r in requests_of(spans, 14)] + [requests_of(spans, 512)[0].SerializeToString()]


def malformed(good: bytes) -> list[bytes]:
    """Bodies protobuf refuses, or that the reader must give up on, made from a good one."""
    nested = b"\x0a\x00"
    for _ in range(200):  # an AnyValue array nested 200 deep
        nested = b"\x2a" + bytes([len(nested)]) + nested if len(nested) < 128 else nested
    return [
        good[: len(good) // 2], good[:-1], good[1:],
        b"\x0a\xff\xff\xff\xff\x0f" + good,  # a length past the end
        b"\x0b" + good,  # a group start (wire type 3) at the top
        b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # an 11-byte varint
        good + good[:40],  # a resource_spans given again, cut short
        good.replace(b"\x12\x08", b"\x12\x07", 1),  # a span id of 7 bytes
        good.replace(b"gen_ai", b"gen\xff\xfe", 1),  # bad UTF-8 in a key
        b"\x0a" + bytes([len(nested) + 2]) + b"\x0a" + bytes([len(nested)]) + nested,
        b"", b"\x00", b"\x0a\x00",
        # what the fuzzer found (tests/test_replay_wire.py): a field number past 2^29 - 1, a 10-byte
        # tag, lengths of 6+ bytes
        bytes.fromhex("858080808080807f800a8080"), bytes.fromhex("8080b280808080808000808001"),
        bytes.fromhex("0a80808080808080808000"), bytes.fromhex("b2768080808080008080800100"),
    ]


def write_seeds(corpus: Path) -> int:
    seeds = captured_requests() + sdk_requests()
    seeds += malformed(seeds[-2])
    for data in seeds:
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(seeds)


# --- the child: one input at a time --------------------------------------------------------------
def fields(s: Any) -> tuple[Any, ...]:
    return (s.name, tuple(s.context), tuple(s.parent) if s.parent else None, s.kind, s.start_time, s.end_time,
            s.status.status_code, s.status.description, dict(s.attributes),
            tuple((e.name, dict(e.attributes), e.timestamp) for e in s.events), dict(s.resource.attributes))


def child(so: Path, argv: list[str]) -> None:
    import importlib.util

    import atheris
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from otel_agenteval.replay.formats.native import reader
    from otel_agenteval.replay.formats.protobuf import request_spans

    spec = importlib.util.spec_from_file_location("otel_agenteval.replay._wire_c", so)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    read = reader(module)

    def one_input(data: bytes) -> None:
        got = read(data)
        if got is None:
            return  # given up: protobuf reads it (and names what is wrong)
        req = ExportTraceServiceRequest()
        try:
            req.ParseFromString(data)
        except DecodeError as exc:
            raise AssertionError(f"the C reader accepted a body protobuf refuses: {exc}") from None
        rejects: list[str] = []
        want = [fields(s) for s in request_spans(req, "fuzz", rejects.append)]
        if rejects or [fields(s) for s in got] != want:
            raise AssertionError(f"the C reader read other spans than protobuf: {rejects or 'fields differ'}")
        read(bytearray(data))  # serve's inflated bodies are bytearrays: the same buffer path

    atheris.Setup([sys.argv[0], *argv], one_input)
    atheris.Fuzz()


def canary() -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    p = libc.malloc(16)
    libc.free(ctypes.c_void_p(p))
    buf = ctypes.create_string_buffer(16)
    ctypes.memmove(buf, p, 16)  # ASan's memmove interceptor reports the freed bytes


# --- the parent ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=600, help="fuzzing time (libFuzzer -max_total_time)")
    ap.add_argument("--max-len", type=int, default=65536, help="largest input libFuzzer makes, bytes")
    ap.add_argument("--seed", type=int, default=1, help="libFuzzer -seed (0: random)")
    ap.add_argument("--canary", action="store_true", help="a use-after-free in the child, to show ASan is live")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args(argv)
    if args.child == "canary":
        canary()
        return 0
    if args.child:
        child(Path(args.child), rest)
        return 0
    why = missing()
    if why:
        print(f"fuzz_wire_c: {why}", file=sys.stderr)
        return 2
    import atheris

    so = build()
    work = Path(tempfile.mkdtemp(prefix="fuzz-wire-c-"))
    corpus, crashes = work / "corpus", work / "crashes"
    corpus.mkdir()
    crashes.mkdir()
    seeds = 0 if args.canary else write_seeds(corpus)
    runtime = Path(atheris.path()) / "asan_with_fuzzer.so"
    env = {**os.environ, "LD_PRELOAD": str(runtime),
           "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:abort_on_error=0:handle_abort=1:symbolize=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    cmd = [sys.executable, __file__, "--child", "canary" if args.canary else str(so)]
    if not args.canary:
        cmd += [str(corpus), f"-max_total_time={args.seconds}", f"-max_len={args.max_len}", f"-seed={args.seed}",
                "-timeout=120", "-rss_limit_mb=4096", "-print_final_stats=1", f"-artifact_prefix={crashes}/"]
    t0 = time.perf_counter()
    # one input may take 120 s (atheris's own alarm; under ASan on a loaded machine a slow input is
    # not a finding); a hang past the whole run's time is caught here too
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace", cwd=ROOT,
                              timeout=args.seconds + 120)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        text = out.decode(errors="replace") if isinstance(out, bytes) else out
        proc = subprocess.CompletedProcess(cmd, 124, text, "\nUncaught Python exception: hang: the run overstayed "
                                           f"{args.seconds} s by 120 s (an input that does not finish)\n")
    log = proc.stdout + proc.stderr
    (work / "fuzz.log").write_text(log)
    lines = log.splitlines()
    at = next((k for k, line in enumerate(lines) if re.search(
        r"ERROR: AddressSanitizer|runtime error:|Uncaught Python exception", line)), None)
    stats = {k.split("::")[1]: float(v) for k, v in re.findall(r"^(stat::\w+):\s+(\d+)", log, re.M) if k in STATS}
    cov = re.findall(r"\bcov: (\d+) ft: (\d+) corp: (\d+)", log)
    result = {"exit": proc.returncode, "seconds": round(time.perf_counter() - t0, 1), "seeds": seeds,
              "sanitizers": "address,undefined", "clang": subprocess.run(["clang", "--version"], capture_output=True,
                                                                          text=True).stdout.splitlines()[0],
              "execs": int(stats.get("number_of_executed_units", 0)),
              "execs_per_s": int(stats.get("average_exec_per_sec", 0)),
              "new_units": int(stats.get("new_units_added", 0)), "peak_rss_mb": int(stats.get("peak_rss_mb", 0)),
              "edges_covered": int(cov[-1][0]) if cov else 0, "features": int(cov[-1][1]) if cov else 0,
              "corpus": int(cov[-1][2]) if cov else 0, "crashes": sorted(p.name for p in crashes.iterdir()),
              "finding": None if at is None else "\n".join(lines[at:at + 12])}
    if proc.returncode != 0:
        print(log[-6000:], file=sys.stderr)
        result["work_dir"] = str(work)  # kept: the crashing input and the whole log (fuzz.log) are there
    else:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2) if args.json else
          f"fuzz_wire_c: exit {result['exit']}, {result['execs']:,} inputs in {result['seconds']} s "
          f"({result['execs_per_s']:,}/s), {result['edges_covered']} edges, {result['features']} features, "
          f"corpus {result['seeds']} seeds -> {result['corpus']}, {len(result['crashes'])} findings"
          + (f": {result['finding']}" if result["finding"] else ""))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
