# The two set-up commands (README): `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test bench dashboards clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.core: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.test: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test,dashboards]'
	touch $@

demo: $(VENV)/.core
	$(BIN)/otel-agenteval demo $(ARGS)

test: $(VENV)/.test
	bash .ci/install-tools.sh
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.test
	$(BIN)/python benchmarks/processor_overhead.py

dashboards: $(VENV)/.test
	$(BIN)/python -m dashboards.generate

clean:
	rm -rf $(VENV) .pytest_cache
