#!/usr/bin/env bash
# System tools the tests need: Prometheus and promtool (Debian package `prometheus`).
set -euo pipefail
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "install-tools: prometheus/promtool missing and not root; run: sudo apt-get install -y prometheus" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends prometheus >/dev/null
# The package may start a system service; the tests start their own server on a free port.
(service prometheus stop || pkill -x prometheus || true) >/dev/null 2>&1
command -v promtool >/dev/null
