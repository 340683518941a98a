#!/usr/bin/env bash
# End-to-end tests against real agent frameworks whose pins conflict with the main environment's
# (google-adk pins the OpenTelemetry SDK; Strands does not resolve beside pydantic-ai and the rest):
# one virtual environment per framework, under .venv/frameworks/NAME, each installed by ONE resolver
# call (the framework's pinned requirements from tests/frameworks/envs/NAME.txt, the test runner, and
# a plain Python wheel of this package built once from the tracked files), so the framework's own
# pins hold exactly as they would for a user. Downloads go through uv's wheel cache
# (UV_CACHE_DIR, default ~/.cache/otel-agenteval/uv): a second run installs nothing from the network.
#
#   bash .ci/frameworks.sh                         # every environment
#   OTEL_AGENTEVAL_FRAMEWORKS="crewai strands" bash .ci/frameworks.sh -x   # some; pytest args after
#
# Each environment's tests run from a scratch directory, so they import the installed wheel, not
# the source tree (which may hold a compiled build).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
venv=${VENV:-.venv}
root="$repo/$venv/frameworks"
uv_version=0.13.8
pytest_pins=(pytest==9.2.0 pytest-timeout==2.4.0)
envs=${OTEL_AGENTEVAL_FRAMEWORKS:-strands google-adk crewai smolagents agent-framework autogen node}

declare -A tests=(
  [strands]="test_strands.py test_guard_strands.py test_examples.py"
  [google-adk]="test_google_adk.py test_guard_google_adk.py test_install_beside.py test_examples.py"
  [crewai]="test_crewai.py"
  [smolagents]="test_smolagents.py"
  [agent-framework]="test_agent_framework.py"
  [autogen]="test_autogen.py"
)

secs() { echo $(( $(date +%s) - $1 )); }

# TypeScript agents under Node (issue 39): each framework's exact npm packages
# (tests/frameworks/node/packages-NAME/package.json) installed once under ~/.cache/otel-agenteval/node/NAME,
# again only when that file changes; the test runs them live into a real `serve` (test_node_live.py).
if [[ " $envs " == *" node "* ]] && ! { command -v node && command -v npm; } >/dev/null; then
  [ -z "${CI:-}" ] || { echo "frameworks: node: the TypeScript leg needs node and npm" >&2; exit 1; }
  echo "frameworks: node: no node or npm here, the TypeScript leg skipped" >&2
  envs=${envs//node/}
fi
if [[ " $envs " == *" node "* ]]; then
  envs=${envs//node/}
  t0=$(date +%s)
  export OTEL_AGENTEVAL_NODE_DIR="${OTEL_AGENTEVAL_NODE_DIR:-$HOME/.cache/otel-agenteval/node}"
  for pkg in tests/frameworks/node/packages-*/package.json; do
    name=$(basename "$(dirname "$pkg")"); name=${name#packages-}
    dir="$OTEL_AGENTEVAL_NODE_DIR/$name"
    if [ ! -d "$dir/node_modules" ] || ! cmp -s "$pkg" "$dir/package.json"; then
      rm -rf "$dir" && mkdir -p "$dir" && cp "$pkg" "$dir/package.json"
      (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
    fi
  done
  installed=$(secs "$t0")
  t0=$(date +%s)
  # the main environment's package, as the main suite tests it (these are Node's pins, not Python's)
  OTEL_AGENTEVAL_NODE_LEG=1 "$repo/$venv/bin/python" -m pytest -p no:cacheprovider -q tests/frameworks/test_node_live.py "$@"
  echo "frameworks: node: install ${installed}s, tests $(secs "$t0")s" >&2
fi
[ -n "${envs// /}" ] || exit 0

uv="$repo/$venv/bin/uv"
if [ ! -x "$uv" ] || [ "$("$uv" --version | cut -d' ' -f2)" != "$uv_version" ]; then
  "$repo/$venv/bin/pip" install -q "uv==$uv_version"
fi
export UV_CACHE_DIR="${UV_CACHE_DIR:-$HOME/.cache/otel-agenteval/uv}"
export UV_NO_PROGRESS=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/dist" "$work/run" "$root"

t0=$(date +%s)
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/src"
OTEL_AGENTEVAL_PURE_PYTHON=1 "$uv" build -q --wheel --out-dir "$work/dist" "$work/src" 2>"$work/build.log" \
  || { cat "$work/build.log" >&2; exit 1; }
wheel=$(ls "$work"/dist/*.whl)
echo "frameworks: built $(basename "$wheel") in $(secs "$t0")s" >&2

summary=()
for env in $envs; do
  [ -n "${tests[$env]:-}" ] || { echo "frameworks: unknown environment $env" >&2; exit 2; }
  reqs="tests/frameworks/envs/$env.txt"
  dir="$root/$env"
  stamp="$dir/.requirements"
  t0=$(date +%s)
  # a new environment when its requirements changed, so nothing stale stays installed
  if [ ! -x "$dir/bin/python" ] || ! cmp -s "$reqs" "$stamp"; then
    rm -rf "$dir"
    "$uv" venv -q --python "$repo/$venv/bin/python" "$dir"
  fi
  "$uv" pip install -q --python "$dir/bin/python" --reinstall-package otel-agenteval \
    -r "$reqs" "${pytest_pins[@]}" "$wheel"
  cp "$reqs" "$stamp"
  installed=$(secs "$t0")
  t0=$(date +%s)
  files=()
  for f in ${tests[$env]}; do files+=("$repo/tests/frameworks/$f"); done
  (cd "$work/run" && OTEL_AGENTEVAL_FRAMEWORK_ENV="$env" OTEL_AGENTEVAL_WHEEL="$wheel" OTEL_AGENTEVAL_UV="$uv" \
    "$dir/bin/python" -m pytest -p no:cacheprovider -q "${files[@]}" "$@")
  summary+=("$env: install ${installed}s, tests $(secs "$t0")s")
done
printf 'frameworks: %s\n' "${summary[@]}" >&2
