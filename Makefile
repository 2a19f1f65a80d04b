# The two commands a newcomer needs (README.md): `make run` and `make test`.
# Both create ./.venv and install Starling with all extras on first use.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

# The first `make run` or `make test` says what it installs and about how long it takes:
# minutes of silence looked like a hang.
$(BIN)/.installed: pyproject.toml
	@echo "Installing Starling and its dependencies into $(VENV) (first time only):"
	@echo "  grpcio, numpy, scipy, pydantic; matplotlib, arviz, pot for the reports;"
	@echo "  pytest, ruff, mypy, mkdocs for development. About 1-3 minutes on a fast"
	@echo "  connection (about 40 s with a warm pip cache); pip names each package below."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar off -e ".[all]"
	@echo "Installed; later runs start at once."
	touch $@

.PHONY: install run test quick lint docs typecheck-links protos bench testbed wheel
install: $(BIN)/.installed

run: $(BIN)/.installed
	$(BIN)/starling run examples/quickstart.yaml

# Lint first (seconds), then the whole suite: e2e and slow included (what CI runs).
test: lint
	$(BIN)/python -m pytest

# ruff's rules and formatting, mypy (strict on node/, see [tool.mypy] in pyproject.toml), the
# import contracts (layers, node independent of the orchestrator: [tool.importlinter]), both
# on this tree's folders linked under build/typecheck/starling/, the module-size warning, and
# the documentation site built with --strict (a broken link or a page missing from
# mkdocs.yml's nav fails it; not --quiet, which hides the warnings from --strict too, so that
# it passes).
lint: $(BIN)/.installed typecheck-links
	$(BIN)/ruff check node orchestrator tests benchmarks
	$(BIN)/ruff format --check node orchestrator tests benchmarks
	$(BIN)/mypy
	PYTHONPATH=build/typecheck $(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/python scripts/module_sizes.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The documentation site (docs/, mkdocs.yml) into site/, which git ignores; open
# site/index.html, or `.venv/bin/mkdocs serve` while you edit.
docs: $(BIN)/.installed typecheck-links
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The two packages under the names they are installed as, build/typecheck/starling/{node,
# orchestrator}: mypy and mkdocstrings read source files and cannot follow setuptools'
# editable-install import hook, which maps starling.node to ./node only at import time.
typecheck-links:
	mkdir -p build/typecheck/starling
	ln -sfn ../../../node build/typecheck/starling/node
	ln -sfn ../../../orchestrator build/typecheck/starling/orchestrator

# The edit-test loop, under 3 minutes on 2 cores: the tests that start no process (no node,
# no backend, no docker) and run no whole study. Every test that starts a process is marked
# e2e (tests/process_guard.py fails an unmarked one); every test that runs a whole study (a
# paper reproduction, a shipped `study:` file) is marked slow. `make test` runs them all.
quick: $(BIN)/.installed
	$(BIN)/python -m pytest -m "not e2e and not slow"

protos: $(BIN)/.installed
	$(BIN)/python protos/generate.py

# Starling beside raw grpcio (docs/performance.md): one table, benchmarks/results.json.
# QUICK=1 is the short suite CI runs (< 2 min); timings are printed, never asserted.
bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks $(if $(QUICK),--quick)

# The compose testbed (docs/deployment/testbed.md): checks the base image first and, where it
# cannot be pulled, says how to build offline (docker/testbed.sh); then `docker compose run
# --rm --build orchestrator`, which rebuilds only what changed and exits with the run's code.
testbed:
	docker/testbed.sh

# The wheel a device installs with no index (docs/deployment/devices.md): dist/*.whl,
# built with the venv's own setuptools (pyproject.toml's build requirement, checked first), so
# no build environment is fetched.
wheel: $(BIN)/.installed
	rm -rf build/lib dist/starling_mcmc-*.whl
	$(BIN)/python -m pip install --quiet "setuptools>=77"
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .
	@ls dist/starling_mcmc-*.whl | sed 's/^/wheel: /'
