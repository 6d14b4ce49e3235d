# Quick start: `make run` (set up + run the default scenario) and `make test` (set up + tests).
# Only Python 3.10+ is needed. TORCH picks the torch wheel installed first; the default CPU build is
# small and fast. On a CUDA machine: `make run TORCH='torch>=2.4,<=2.14.1'`.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" || $(BIN)/python -m pip install --quiet "torch>=2.4,<=2.14.1"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: setup
	$(BIN)/mhabench run

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check mhabench tests
	$(BIN)/ruff format --check mhabench tests

clean:
	rm -rf $(VENV) build *.egg-info
