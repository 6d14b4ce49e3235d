# Quick start: `make run` (set up + run the default scenario) and `make test` (set up + tests).
# Only Python 3.10+ is needed. TORCH picks the torch wheel installed first; the default CPU build is
# small and fast. On a CUDA machine: `make run TORCH='torch>=2.4,<=2.14.1'`.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser run test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" || $(BIN)/python -m pip install --quiet "torch>=2.4,<=2.14.1"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: setup
	$(BIN)/mhabench run

test: setup browser
	$(BIN)/python -m pytest -q

# Headless Chromium (Debian's package) for tests/test_browser.py. Best effort: where apt-get is not
# available or not allowed, that test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	  echo "chromium not installed: the browser test will be skipped"

lint: setup
	$(BIN)/ruff check mhabench tests
	$(BIN)/ruff format --check mhabench tests

clean:
	rm -rf $(VENV) build *.egg-info
