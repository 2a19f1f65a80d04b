# The two commands a newcomer needs (see README): `make run` and `make test`.
# Both create ./.venv and install Starling with all extras on first use.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $@

.PHONY: install run test quick lint protos bench
install: $(BIN)/.installed

run: $(BIN)/.installed
	$(BIN)/starling run examples/quickstart.yaml

# Lint first (seconds), then the whole suite: e2e and slow included (what CI runs).
test: lint
	$(BIN)/python -m pytest

# ruff's rules and formatting, mypy (strict on node/, see [tool.mypy] in pyproject.toml), and
# the import contracts (layers, node independent of the orchestrator: [tool.importlinter]),
# both run on this tree's folders linked under build/typecheck/starling/.
lint: $(BIN)/.installed
	$(BIN)/ruff check node orchestrator tests benchmarks
	$(BIN)/ruff format --check node orchestrator tests benchmarks
	mkdir -p build/typecheck/starling
	ln -sfn ../../../node build/typecheck/starling/node
	ln -sfn ../../../orchestrator build/typecheck/starling/orchestrator
	$(BIN)/mypy
	PYTHONPATH=build/typecheck $(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/python scripts/module_sizes.py

# The edit-test loop, under 3 minutes on 2 cores: the tests that start no process (no node,
# no backend, no docker) and run no whole study. Every test that starts a process is marked
# e2e (tests/process_guard.py fails an unmarked one); every test that runs a whole study (a
# paper reproduction, a shipped `study:` file) is marked slow. `make test` runs them all.
quick: $(BIN)/.installed
	$(BIN)/python -m pytest -m "not e2e and not slow"

protos: $(BIN)/.installed
	$(BIN)/python protos/generate.py

# Starling beside raw grpcio (see README, Performance): one table, benchmarks/results.json.
# QUICK=1 is the short suite CI runs (< 2 min); timings are printed, never asserted.
bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks $(if $(QUICK),--quick)
