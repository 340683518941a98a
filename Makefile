# The two set-up commands (README): `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# the compiled (mypyc) build of the hot path: rebuilt in place when its sources change
COMPILED = $(VENV)/.compiled
SOURCES  = $(wildcard otel_agenteval/*.py otel_agenteval/*/*.py otel_agenteval/*/*/*.py otel_agenteval/*/*.c otel_agenteval/*/*.h) setup.py

.PHONY: demo test test-pure test-frameworks first-hour build bench dashboards lint clean collector mutants

# Each step says what it does. Installing compiles the per-span modules with mypyc (minutes on two
# cores): pip's verbose output is kept in $(VENV)/install.log and only setup.py's progress lines
# (what it compiles, how long it took) are shown. OTEL_AGENTEVAL_PURE_PYTHON=1 make demo: plain
# Python, seconds.
SHELL := bash
INSTALL_PROGRESS = 2>&1 | tee $(VENV)/install.log | { grep --line-buffered -o 'otel-agenteval build: .*' || true; }

$(BIN)/python:
	@echo "make: creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.core: $(BIN)/python pyproject.toml
	@echo "make: installing the package and its dependencies into $(VENV) (log: $(VENV)/install.log)"
	@set -o pipefail; $(BIN)/pip install -v -e . 'setuptools>=77' 'mypy==2.4.1' $(INSTALL_PROGRESS) || { tail -30 $(VENV)/install.log; exit 1; }
	touch $@ $(COMPILED)

$(VENV)/.test: $(BIN)/python pyproject.toml
	@echo "make: installing the package with its test extras into $(VENV) (log: $(VENV)/install.log)"
	@set -o pipefail; $(BIN)/pip install -v -e '.[test,dashboards]' $(INSTALL_PROGRESS) \
	  || { tail -30 $(VENV)/install.log; exit 1; }
	touch $@ $(COMPILED)

$(COMPILED): $(SOURCES)
	@echo "make: sources changed since the last compile: compiling in place"
	$(BIN)/python setup.py -q build_ext --inplace --force
	touch $@

build: $(VENV)/.test $(COMPILED)

demo: $(VENV)/.core $(COMPILED)
	$(BIN)/otel-agenteval demo $(ARGS)

# the whole suite on the compiled build, then again on plain Python (what installs without a compiler)
test: $(VENV)/.test $(COMPILED)
	bash .ci/install-tools.sh
	$(MAKE) --no-print-directory collector
	OTEL_AGENTEVAL_EXPECT_BUILD="compiled (mypyc)" $(BIN)/python -m pytest $(PYTEST_ARGS)
	bash .ci/test-pure.sh $(PYTEST_ARGS)
	VENV=$(VENV) bash .ci/frameworks.sh $(PYTEST_ARGS)
	VENV=$(VENV) bash .ci/phoenix.sh $(PYTEST_ARGS)
	bash .ci/first-hour.sh

# the README's install line and quick start from a copy of the clone; the sdist and wheel in fresh venvs
first-hour:
	bash .ci/first-hour.sh

test-pure: $(VENV)/.test
	bash .ci/test-pure.sh $(PYTEST_ARGS)

# the OpenTelemetry Collector tests/test_collector.py runs, built from its Go modules (first build
# minutes, then cached in ~/.cache/otel-agenteval/collector by release); fatal on CI, where Go is
# there; elsewhere the Collector tests skip and say why
collector:
	bash .ci/build-collector.sh >/dev/null || [ -z "$$CI" ]

# what tests/test_lint.py and tests/test_imports.py check, by hand (mypy: strict where pyproject.toml allows)
lint: $(VENV)/.test
	$(BIN)/ruff check otel_agenteval tests benchmarks
	$(BIN)/mypy
	$(BIN)/python .ci/import_graph.py
	$(BIN)/python .ci/module_diagram.py --check

# frameworks with conflicting pins, each in its own environment under $(VENV)/frameworks
test-frameworks: $(VENV)/.test
	VENV=$(VENV) bash .ci/frameworks.sh $(PYTEST_ARGS)

bench: $(VENV)/.test $(COMPILED)
	$(BIN)/python benchmarks/overhead.py --workload tool-heavy
	$(BIN)/python benchmarks/overhead.py --workload pydantic-ai

# plant one realistic bug at a time in the safety path (rules, guard, engine, WAL, decoding, policy)
# and see whether the tests notice: per-module score, survivors named (minutes, niced; outside .ci/run).
# MUTANTS_ARGS="--only guard/" for one package; "--check" to see that every site still applies
mutants: $(VENV)/.test
	nice $(BIN)/python benchmarks/mutants.py $(MUTANTS_ARGS)

dashboards: $(VENV)/.test
	$(BIN)/python -m dashboards.generate

clean:
	rm -rf $(VENV) .pytest_cache build
	find otel_agenteval -name '*.so' -delete
	rm -f otel_agenteval__mypyc*.so
