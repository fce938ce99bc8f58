# Two commands for a newcomer: `make demo` (the main job on embedded defaults) and `make test`.
# Both bootstrap .venv themselves.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SENDHOST := $(VENV)/bin/sendhost

.PHONY: demo test test-fast test-unit lint clean docs-samples
.PHONY: constraints check-constraints
CONSTRAINTS := constraints.txt

# Installs with the pins in constraints.txt, so a new release upstream cannot change what the tests run against.
$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev]'
	touch $@

# Refresh the pins deliberately, in a commit of their own: resolve pyproject.toml afresh in a throwaway venv and pin
# what it installed (sendhost itself excluded); then `make clean test` before committing constraints.txt.
constraints:
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PYTHON) -m venv "$$tmp/venv" && \
	"$$tmp/venv/bin/python" -m pip install --quiet --upgrade pip && \
	"$$tmp/venv/bin/python" -m pip install --quiet -e '.[dev]' && \
	{ echo "# Pins for make and CI (pip install -c $(CONSTRAINTS)). Refreshed deliberately with 'make constraints',"; \
	  echo "# in a commit of its own, after the tests pass on the new pins. Not a requirements file: pyproject.toml"; \
	  echo "# says what sendhost needs; this says which versions CI has proven."; \
	  "$$tmp/venv/bin/python" -m pip freeze --all --exclude pip --exclude-editable; } > $(CONSTRAINTS).new && \
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

# CI: every installed package is pinned; a dependency added to pyproject.toml without `make constraints` fails here.
check-constraints: $(VENV)/.installed
	@$(PY) -m pip freeze --all --exclude pip --exclude-editable > $(VENV)/freeze.txt
	@if grep -vxFf $(CONSTRAINTS) $(VENV)/freeze.txt; then \
	  echo "^ installed but not pinned in $(CONSTRAINTS): run 'make constraints', test, and commit it" >&2; exit 1; fi

# The main job on embedded defaults: two weeks of sending on the example inventory (also shipped in the package,
# so `sendhost simulate` alone runs it too), simulated in seconds
# (embedded Redis, AWS in moto, the example zones audited offline), with an HTML report beside the summary.
demo: $(VENV)/.installed
	$(SENDHOST) --inventory inventory.example.yml simulate --report demo-report.html

# Three tiers (README "Development"). `test` is everything and what CI runs; `test-fast` leaves out the tests marked
# slow (whole simulations, kill/restart and chaos scenarios, provisioning hosts in network namespaces, packaging);
# `test-unit` runs only the tests that need no service at all (tests/support/tiers.py says which, and checks it).
# Each runs on PYTEST_XDIST pytest-xdist workers, processes with services and databases of their own (a test's
# Redis, PostgreSQL database, ports, namespace: tests/support/). The slow tests mostly wait on servers and
# subprocesses, so more workers than cores pays; PYTEST_XDIST=0 runs serially in one process (`-n 0`), and
# PYTEST_XDIST=auto one worker per core. `--dist worksteal`: an idle worker takes queued tests from a busy one, so
# one worker is not left with the long scenarios at the end.
PYTEST_XDIST ?= 4
XDIST := -n $(PYTEST_XDIST) $(if $(filter 0,$(PYTEST_XDIST)),,--dist worksteal)

test: $(VENV)/.installed
	$(PY) -m pytest $(XDIST)

test-fast: $(VENV)/.installed
	$(PY) -m pytest $(XDIST) -m "not slow"

test-unit: $(VENV)/.installed
	$(PY) -m pytest $(XDIST) -m unit

# Rewrite every `<!-- sample: ID -->` block of README.md and docs/ with what the tool prints now (tools/docs_samples.py;
# the simulation's sample takes a few minutes). `--check` instead of `--write` shows what is stale, as the tests do.
docs-samples: $(VENV)/.installed
	$(PY) tools/docs_samples.py --write

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .sendhost .pytest_cache .mypy_cache .ruff_cache demo-report.html
