"""Grafana dashboards generated from Python (grafana-foundation-sdk); see generate.py."""
