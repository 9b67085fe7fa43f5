# Everything runs from a virtual environment this Makefile creates from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install generate check test test-compat demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

generate: $(STAMP)
	$(BIN)/python tools/generate.py

check: $(STAMP)
	$(BIN)/python tools/generate.py --check
	$(BIN)/python tools/check_schemas.py
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: $(STAMP)
	$(BIN)/python -m pytest

# LionAGI 0.36.0 lives in its own environment: it is a reference, never a dependency.
LIONAGI_VENV ?= .venv-lionagi
$(LIONAGI_VENV)/.installed:
	$(PYTHON) -m venv $(LIONAGI_VENV)
	$(LIONAGI_VENV)/bin/python -m pip install --quiet --disable-pip-version-check lionagi==0.36.0
	touch $@

test-compat: $(STAMP) $(LIONAGI_VENV)/.installed
	LIONMSG_LIONAGI_PYTHON=$(abspath $(LIONAGI_VENV))/bin/python $(BIN)/python -m pytest compat

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

clean:
	rm -rf $(VENV) $(LIONAGI_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
