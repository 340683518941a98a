#!/usr/bin/env bash
# A new user's first hour, on this machine as if fresh (issue 26):
#  1. the README's first block, as written, in a copy of the clone with no venv: its install line,
#     then the quick start, which must show the duplicate write in the log and in /metrics;
#  2. the release artifacts: `python -m build` (sdist and wheel; no warning from the build
#     backend), the wheel installed with the serve extra in a fresh venv and smoke-run, then the
#     sdist installed over it and smoke-run again.
# Plain Python builds (OTEL_AGENTEVAL_PURE_PYTHON=1), so this takes about a minute with pip's cache
# warm (~/.cache/pip); the compiled build is what `make test` tests. Needs python3, curl, network
# to PyPI (or a warm cache).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
PYTHON=${PYTHON:-python3}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
started=$(date +%s)
say() { echo "first-hour: $* ($(( $(date +%s) - started )) s)" >&2; }
export OTEL_AGENTEVAL_PURE_PYTHON=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# --- 1. the README's first block, as written ------------------------------------------------
clone="$work/otel-agenteval"
mkdir -p "$clone"
git ls-files -z --cached --others --exclude-standard | grep -zv '^tests/frameworks/' \
  | xargs -0 cp --parents -t "$clone"
block=$(awk '/^```(sh|bash)$/ && !n {inb=1; n=1; next} inb && /^```/ {exit} inb {print}' README.md)
if ! "$PYTHON" -c 'import socket; socket.create_server(("127.0.0.1", 9464)).close()' 2>/dev/null; then
  port=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  say "port 9464 is taken here: the quick start runs on $port instead"
  block=${block//9464/$port}
fi
say "running the README's first block in a copy of the clone"
out=$(cd "$clone" && env -u VIRTUAL_ENV PATH="$(dirname "$(command -v "$PYTHON")"):/usr/bin:/bin" \
  bash -euo pipefail -c "$block" 2>&1) || { echo "$out" >&2; say "FAILED: the README's first block"; exit 1; }
grep -q 'agenteval.violation: create_claim called again' <<<"$out" \
  || { echo "$out" >&2; say "FAILED: the quick start logged no duplicate write"; exit 1; }
grep -Eq 'agenteval_violations_total\{.*rule="duplicate_write".*\} 1\.0' <<<"$out" \
  || { echo "$out" >&2; say "FAILED: /metrics showed no duplicate write"; exit 1; }
say "ok: the quick start installed from the clone and showed the duplicate write in the log and in /metrics"

# --- 2. sdist and wheel -----------------------------------------------------------------------
"$clone/.venv/bin/pip" install -q 'build>=1.2'
(cd "$clone" && .venv/bin/python -m build -o "$work/dist" >"$work/build.log" 2>&1) \
  || { cat "$work/build.log" >&2; say "FAILED: python -m build"; exit 1; }
if grep -Ei 'deprecat|BackendWarning|SetuptoolsWarning' "$work/build.log" >&2; then
  say "FAILED: the build warns (above)"
  exit 1
fi
tar tzf "$work/dist"/otel_agenteval-*.tar.gz >"$work/sdist.txt"
grep -q 'otel_agenteval/replay/formats/_wire_c.c' "$work/sdist.txt" \
  || { say "FAILED: the sdist lacks the C sources a compiled build needs"; exit 1; }
say "built $(cd "$work/dist" && echo *)"

smoke() {  # the installed commands, end to end, outside the clone
  local venv=$1 what=$2
  (
    cd "$work" && rm -rf smoke && mkdir smoke && cd smoke
    "$venv/bin/otel-agenteval" --version
    "$venv/bin/otel-agenteval" demo --runs 40 --no-serve --quiet --traces-out runs.jsonl.gz >/dev/null 2>&1
    "$venv/bin/otel-agenteval" init --from runs.jsonl.gz -o agenteval.yaml >/dev/null
    "$venv/bin/otel-agenteval" check-policy agenteval.yaml >/dev/null
    code=0; "$venv/bin/otel-agenteval" replay runs.jsonl.gz --policy agenteval.yaml --quiet >/dev/null || code=$?
    [ "$code" -le 1 ] || exit "$code"
    "$venv/bin/python" -c 'import otel_agenteval.receiver.server'  # the serve extra's imports
  ) >"$work/smoke.log" 2>&1 || { cat "$work/smoke.log" >&2; say "FAILED: smoke run of the $what"; exit 1; }
  say "ok: the $what installs and runs ($(head -1 "$work/smoke.log"))"
}
"$PYTHON" -m venv "$work/wheel-venv"
"$work/wheel-venv/bin/pip" install -q "$(echo "$work"/dist/otel_agenteval-*.whl)[serve]"
smoke "$work/wheel-venv" wheel
"$work/wheel-venv/bin/pip" install -q --force-reinstall --no-deps "$(echo "$work"/dist/otel_agenteval-*.tar.gz)"
smoke "$work/wheel-venv" sdist
say "done"
