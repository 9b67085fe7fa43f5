# Everything runs from a virtual environment this Makefile creates from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install generate bundle check test test-compat fuzz demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

generate: $(STAMP)
	$(BIN)/python tools/generate.py
	$(BIN)/python tools/bundle.py

bundle: $(STAMP)
	$(BIN)/python tools/bundle.py

check: $(STAMP)
	$(BIN)/python tools/generate.py --check
	$(BIN)/python tools/bundle.py --check
	$(BIN)/python tools/check_schemas.py
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: $(STAMP)
	$(BIN)/python -m pytest

# The fuzz properties with many more examples than CI runs: make fuzz N=10000
N ?= 2000
fuzz: $(STAMP)
	LIONMSG_FUZZ_EXAMPLES=$(N) $(BIN)/python -m pytest -q tests/test_fuzz.py

# LionAGI 0.36.0 lives in its own environment: it is a reference, never a dependency.
LIONAGI_VENV ?= .venv-lionagi
$(LIONAGI_VENV)/.installed:
	$(PYTHON) -m venv $(LIONAGI_VENV)
	$(LIONAGI_VENV)/bin/python -m pip install --quiet --disable-pip-version-check lionagi==0.36.0
	touch $@

test-compat: $(STAMP) $(LIONAGI_VENV)/.installed
	LIONMSG_LIONAGI_PYTHON=$(abspath $(LIONAGI_VENV))/bin/python $(BIN)/python -m pytest compat

# The end-to-end demo (offline, deterministic); its files land in build/demo/.
demo: $(STAMP)
	$(BIN)/python examples/demo/demo.py build/demo

clean:
	rm -rf $(VENV) $(LIONAGI_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
