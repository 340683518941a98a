"""Agents and stubs for the rerun tests, importable as MODULE:CALLABLE (the command's --agent)."""
