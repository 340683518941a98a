#!/usr/bin/env bash
# The trace UI test (tests/test_trace_ui_phoenix.py): a real Arize Phoenix on 127.0.0.1, sent a real
# agent run's spans, shows the processor's findings on the offending span. Phoenix and its ~140
# dependencies live in their own virtual environment, outside the clone and keyed by the hash of
# .ci/phoenix-requirements.txt (every package pinned), under ~/.cache/otel-agenteval/phoenix/KEY:
# built once (bytecode compiled, so Phoenix starts in seconds, not a minute), then reused. Downloads
# go through uv's wheel cache, as in .ci/frameworks.sh.
#
#   bash .ci/phoenix.sh            # build the environment if needed, run the test; pytest args after
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
venv=${VENV:-.venv}
reqs=.ci/phoenix-requirements.txt
uv_version=0.13.8
key=$(sha256sum "$reqs" | cut -c1-12)
dir=${OTEL_AGENTEVAL_PHOENIX_VENV:-$HOME/.cache/otel-agenteval/phoenix/$key}
secs() { echo $(( $(date +%s) - $1 )); }

uv="$repo/$venv/bin/uv"
if [ ! -x "$uv" ] || [ "$("$uv" --version | cut -d' ' -f2)" != "$uv_version" ]; then
  "$repo/$venv/bin/pip" install -q "uv==$uv_version"
fi
export UV_CACHE_DIR="${UV_CACHE_DIR:-$HOME/.cache/otel-agenteval/uv}"
export UV_NO_PROGRESS=1

t0=$(date +%s)
# .complete is written last: an install cut short is started again, never half used
if [ ! -f "$dir/.complete" ] || ! "$dir/bin/python" -c 'import sys' 2>/dev/null; then
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  python=$("$repo/$venv/bin/python" -c 'import sys; print(sys._base_executable)')
  "$uv" venv -q --python "$python" "$dir"
  timeout 1200 "$uv" pip install -q --compile-bytecode --python "$dir/bin/python" -r "$reqs"
  cp "$reqs" "$dir/.complete"
  echo "phoenix: environment built in $(secs "$t0")s at $dir" >&2
fi

t0=$(date +%s)
OTEL_AGENTEVAL_PHOENIX_VENV="$dir" timeout 600 "$repo/$venv/bin/python" -m pytest -p no:cacheprovider -q \
  tests/test_trace_ui_phoenix.py "$@"
echo "phoenix: tests $(secs "$t0")s" >&2
