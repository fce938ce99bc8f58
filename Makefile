# Two commands for a newcomer: `make demo` (the main job on embedded defaults) and `make test`.
# Both bootstrap .venv themselves.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SENDHOST := $(VENV)/bin/sendhost

.PHONY: demo test lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The main job on embedded defaults: two weeks of sending on the example inventory (also shipped in the package,
# so `sendhost simulate` alone runs it too), simulated in seconds
# (embedded Redis, AWS in moto, the example zones audited offline), with an HTML report beside the summary.
demo: $(VENV)/.installed
	$(SENDHOST) --inventory inventory.example.yml simulate --report demo-report.html

test: $(VENV)/.installed
	$(PY) -m pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .sendhost .pytest_cache .mypy_cache .ruff_cache demo-report.html
