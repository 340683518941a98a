#!/usr/bin/env bash
# Builds the OpenTelemetry Collector the tests run (.ci/collector/builder-config.yaml) with the
# Collector Builder (ocb), from the Collector's Go modules through the Go module proxy.
# Cached outside the clone, keyed by the Collector release and the component list:
#   ~/.cache/otel-agenteval/collector/<release>-<config hash>/otelcol-agenteval
# The Go module and build caches live under ~/.cache/otel-agenteval/collector/go too, so a second
# run (or a second clone) is instant. Prints the binary's path on stdout; progress on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
config="$here/collector/builder-config.yaml"
release="$(sed -n 's/^  version: \([0-9.]*\)-agenteval$/\1/p' "$config")"
[ -n "$release" ] || { echo "build-collector: no 'version: X.Y.Z-agenteval' in $config" >&2; exit 2; }
root="${OTEL_AGENTEVAL_CACHE:-$HOME/.cache/otel-agenteval}/collector"
key="$release-$(sha256sum "$config" | cut -c1-12)"
dir="$root/$key"
binary="$dir/otelcol-agenteval"
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi

command -v go >/dev/null || { echo "build-collector: no 'go' on PATH (Go >= 1.24 is needed)" >&2; exit 3; }
mkdir -p "$dir" "$root/go"
exec 9>"$root/.lock"
flock 9                                      # one build at a time (parallel test workers)
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi

export GOPATH="$root/go/path" GOMODCACHE="$root/go/mod" GOCACHE="$root/go/build" \
       GOBIN="$root/go/bin-$release" GOFLAGS="-buildvcs=false -modcacherw" GOTOOLCHAIN=local
start=$(date +%s)
echo "build-collector: $(go version); building Collector $release into $dir (first build: minutes)" >&2
nice -n 10 go install "go.opentelemetry.io/collector/cmd/builder@v$release" >&2
work="$dir/src"
rm -rf "$work"
sed "s|^  output_path: .*|  output_path: $work|" "$config" > "$dir/builder-config.yaml"
nice -n 10 "$GOBIN/builder" --config "$dir/builder-config.yaml" >&2
mv "$work/otelcol-agenteval" "$binary.tmp" && mv "$binary.tmp" "$binary"
rm -rf "$work"
echo "build-collector: built in $(( $(date +%s) - start ))s: $binary" >&2
echo "$binary"
