# Everything runs from a virtual environment this Makefile creates from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install generate bundle check check-schemas test test-floors test-compat fuzz ts-check bench bench-smoke demo clean

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

# The TypeScript client (clients/typescript): Node.js from the machine, npm packages pinned by the lock
# file. npm ci rewrites node_modules/.package-lock.json, so it is newer than the lock after an install.
TS_DIR := clients/typescript
NODE_STAMP := $(TS_DIR)/node_modules/.package-lock.json

$(NODE_STAMP): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund
	touch $@

# Types generated from schemas/ (not committed), then tsc --strict over the client (compiled to build/).
ts-check: $(NODE_STAMP)
	cd $(TS_DIR) && node scripts/generate-types.mjs && ./node_modules/.bin/tsc -p tsconfig.json

# The schemas' own rules first: a broken schema is named plainly before the tools that read it fail.
check-schemas: $(STAMP)
	$(BIN)/python tools/check_schemas.py

check: $(STAMP) check-schemas ts-check
	$(BIN)/python tools/generate.py --check
	$(BIN)/python tools/bundle.py --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The cross-language tests need node_modules and the compiled client. The suite runs in one worker
# process per core (pytest-xdist); `make test WORKERS=0` runs it in this process, one test at a time.
WORKERS ?= auto
test: $(STAMP) ts-check
	$(BIN)/python -m pytest -n $(WORKERS)

# The lowest versions pyproject.toml declares (tools/floors.py pins each dependency at its lower bound):
# the suite, but for the generator's own tests, in an environment of exactly those.
FLOORS_VENV ?= .venv-floors
$(FLOORS_VENV)/.installed: pyproject.toml tools/floors.py $(STAMP)
	rm -rf $(FLOORS_VENV)
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(BIN)/python tools/floors.py > $(FLOORS_VENV)/requirements.txt
	$(FLOORS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $(FLOORS_VENV)/requirements.txt
	$(FLOORS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

test-floors: $(FLOORS_VENV)/.installed ts-check
	$(FLOORS_VENV)/bin/python -m pytest -n $(WORKERS) --ignore tests/test_generation.py

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

# The benchmark's own environment: LionAGI 0.36.0 (the reference it is compared against) and matplotlib
# (the plot). Neither is a lionmsg dependency. See bench/README.md.
BENCH_VENV ?= .venv-bench
$(BENCH_VENV)/.installed: bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	touch $@

bench: $(STAMP) $(BENCH_VENV)/.installed
	$(BIN)/python -m bench.run --lionagi-python $(abspath $(BENCH_VENV))/bin/python

bench-smoke: $(STAMP) $(BENCH_VENV)/.installed
	$(BIN)/python -m bench.run --smoke --lionagi-python $(abspath $(BENCH_VENV))/bin/python

# The end-to-end demo (offline, deterministic); its files land in build/demo/.
demo: $(STAMP)
	$(BIN)/python examples/demo/demo.py build/demo

clean:
	rm -rf $(VENV) $(LIONAGI_VENV) $(BENCH_VENV) $(FLOORS_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(TS_DIR)/node_modules $(TS_DIR)/build $(TS_DIR)/src/generated
