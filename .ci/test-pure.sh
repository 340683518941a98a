#!/usr/bin/env bash
# The test suite on the plain Python build: what `pip install` gives without a C compiler (or
# with OTEL_AGENTEVAL_PURE_PYTHON=1). The tracked files are copied without the compiled
# extensions, and that copy comes first on the path of the tests and of every command they run.
# The datasets beside the checkout (../shared, read-only, never copied) are beside the copy too,
# so the judgement tests on real runs (tau-bench, AgentDojo) run on this build as well.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
work="$top/checkout"
mkdir "$work"
if [ -d "$repo/../shared" ]; then
    ln -s "$(cd "$repo/../shared" && pwd)" "$top/shared"
fi
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work"
cd "$work"
PYTHONPATH="$work" OTEL_AGENTEVAL_EXPECT_BUILD="plain Python" "$repo/.venv/bin/python" -m pytest -p no:cacheprovider "$@"
