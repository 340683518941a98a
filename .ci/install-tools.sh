#!/usr/bin/env bash
# System tools the tests need: Prometheus and promtool (Debian package `prometheus`), and a
# headless browser for the HTML report's test (Debian package `chromium`, driven by Playwright
# from PyPI through its executable path; never `playwright install`), and clang for the C wire
# reader's sanitizer fuzz run (tests/test_wire_c_fuzz.py: ASan + UBSan, coverage for atheris).
#
# Safe on a fresh Debian/Ubuntu machine or container, as root, with or without a service
# manager. The package's service is never left running: the tests start their own
# `prometheus` on a free loopback port, and a system one would hold :9090.
set -euo pipefail

have_tools() {
  command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1 \
    && command -v clang >/dev/null 2>&1 && command -v curl >/dev/null 2>&1  # curl: the README quick start (tests/test_docs_snippets.py)
}

if have_tools; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "install-tools: prometheus/promtool/chromium missing and not root; run: sudo apt-get install -y prometheus chromium clang curl" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-tools: no apt-get; install Prometheus (prometheus and promtool on PATH) and Chromium yourself" >&2
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive

# Forbid maintainer scripts from starting services while we install (policy-rc.d protocol,
# honoured by invoke-rc.d and deb-systemd-invoke). Restore whatever was there before.
POLICY=/usr/sbin/policy-rc.d
BACKUP=""
if [ -e "$POLICY" ]; then
  BACKUP="$(mktemp)"
  cp -p "$POLICY" "$BACKUP"
fi
restore_policy() {
  if [ -n "$BACKUP" ]; then
    cp -p "$BACKUP" "$POLICY" && rm -f "$BACKUP"
  else
    rm -f "$POLICY"
  fi
}
trap restore_policy EXIT
printf '#!/bin/sh\nexit 101\n' >"$POLICY"
chmod 755 "$POLICY"

retry() {
  local n
  for n in 1 2 3; do
    "$@" && return 0
    echo "install-tools: '$*' failed (attempt $n), retrying" >&2
    sleep $((n * 5))
  done
  "$@"
}

retry apt-get update -q >/dev/null
retry apt-get install -y -q --no-install-recommends prometheus chromium clang curl >/dev/null

# Belt and braces: if a service manager started it anyway, stop and disable it.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
elif [ -x /etc/init.d/prometheus ]; then
  /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi

if ! have_tools; then
  echo "install-tools: installed prometheus, chromium and clang but prometheus/promtool/chromium/clang are not on PATH" >&2
  exit 1
fi
echo "install-tools: $(prometheus --version 2>&1 | head -1)" >&2
