# Quick start: `make run` (set up + run the default scenario) and `make test` (set up + tests).
# Only Python 3.10+ is needed. TORCH picks the torch wheel installed first; the default CPU build is
# small and fast. On a CUDA machine: `make run TORCH='torch>=2.5,<=2.14.1'`.
# GPU machines without a package index: `make wheels` here, carry wheels/ there, `make gpu-check` and
# `make gpu-sweep`, or all open questions in one budget: `make gpu-evidence` (docs/gpu.md).
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
# The stamp's name carries a checksum of TORCH, so another torch spec is another stamp: `make run
# TORCH=…` on an existing venv installs that torch instead of keeping whichever one is there.
TORCH_ID := $(firstword $(shell printf '%s' '$(TORCH)' | cksum))
STAMP := $(VENV)/.installed-$(TORCH_ID)
# `make test` also installs the `hf` extra (transformers, for the hf_* peers and their tests) and `cluster`
# (submitit and Ray, for the cluster executors' tests); `make run` needs neither. Setup's `rm -f $(VENV)/.installed*`
# drops this stamp too, so a new venv or a changed pyproject.toml reinstalls it.
HF_STAMP := $(VENV)/.installed-hf

# make gpu-check: the machine's own python3 (with its CUDA torch), the wheels it lacks, the project.
GPU_PYTHON ?= python3
WHEELS ?= wheels
GPU_SITE ?= build/gpu-site
GPU_CHECK_OUT ?= gpu-check
# What the GPU machines' image lacks of the runtime dependencies (pip adds their own dependencies).
GPU_WHEEL_SPECS ?= "pydantic>=2.5" "nvidia-ml-py>=12"
# Wheels taken without their declared dependencies: nvidia-cudnn-frontend (fused_fp8's cuDNN graph) declares
# nvidia-cutlass-dsl and apache-tvm-ffi for its CuTe DSL kernels, which the fp8 graph does not use (docs/gpu.md).
GPU_NODEPS_WHEEL_SPECS ?= "nvidia-cudnn-frontend==1.32.0"
GPU_WHEEL_PYTHON ?= 3.12
GPU_RUN = PYTHONPATH=$(abspath $(GPU_SITE))$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON)

.PHONY: setup hf browser run test test-fast lint docs clean cuda-warning wheels gpu-check gpu-site gpu-sweep gpu-fp8

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.installed*
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --upgrade "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@$(MAKE) --no-print-directory cuda-warning
	touch $(STAMP)

hf: $(HF_STAMP)

$(HF_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev,hf,cluster]"
	touch $(HF_STAMP)

# One line when this machine has an NVIDIA GPU but the venv's torch cannot use it (`device: auto`
# would quietly run on the CPU).
cuda-warning:
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then \
	  $(BIN)/python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || \
	  echo "warning: nvidia-smi sees a GPU but $(VENV) has a torch without CUDA ($$($(BIN)/python -c 'import torch; print(torch.__version__)')); use make run TORCH='torch>=2.5,<=2.14.1'"; \
	fi

run: setup cuda-warning
	$(BIN)/mhabench run

# Two pytest-xdist workers (a 2-core machine's cores; PYTEST_WORKERS=auto takes every core), torch's threads split
# between them (tests/conftest.py). A test file goes to one worker whole (--dist loadfile), so a module's shared
# fixture (a Ray cluster, a torchrun run, the transformers rows) is built once, not once a worker; the longest files
# go first (tests/conftest.py LONGEST_FILES). `make test-fast`: the edit-test loop, the data path's core tests that
# are not slow (docs/development.md).
PYTEST_WORKERS ?= 2
test: setup hf browser
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

test-fast: setup
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "core and not slow"

# Headless Chromium (Debian's package) for tests/test_browser.py. Best effort: where apt-get is not
# available or not allowed, that test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	  echo "chromium not installed: the browser test will be skipped"

lint: setup
	$(BIN)/ruff check mhabench tests
	$(BIN)/ruff format --check mhabench tests

# The README's implementation table, docs/masks.md's capability table, docs/columns.md and the module map's lines
# (docs/development.md), regenerated from the code; `make docs CHECK=1` only says which are out of date.
docs: setup
	$(BIN)/python -m mhabench.checks.docs $(if $(CHECK),--check)

# Wheels for a GPU machine with no package index (CPython $(GPU_WHEEL_PYTHON), x86_64 Linux), into $(WHEELS)/.
wheels:
	$(PYTHON) -m pip download --quiet --only-binary=:all: --python-version $(GPU_WHEEL_PYTHON) \
	  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
	  --implementation cp -d $(WHEELS) $(GPU_WHEEL_SPECS)
	$(PYTHON) -m pip download --quiet --only-binary=:all: --no-deps --python-version $(GPU_WHEEL_PYTHON) \
	  --platform manylinux_2_28_x86_64 --implementation cp -d $(WHEELS) $(GPU_NODEPS_WHEEL_SPECS)

# Every CUDA path, one PASS/FAIL/SKIP line per check, figures in $(GPU_CHECK_OUT)/gpu_check.json.
# Uses $(GPU_PYTHON) as it is; installs $(WHEELS)/*.whl (when present) and the project into
# $(GPU_SITE) with --no-index --no-deps, so nothing is fetched and the system site is never written.
gpu-check: gpu-site
	$(GPU_RUN) -m mhabench.checks.gpu --out $(GPU_CHECK_OUT)

gpu-site:
	@if ls $(WHEELS)/*.whl >/dev/null 2>&1; then \
	  $(GPU_PYTHON) -m pip install --quiet --no-index --no-deps --upgrade --target $(GPU_SITE) $(WHEELS)/*.whl; \
	fi
	rm -rf build/lib  # setuptools reuses it, and it keeps modules a newer tree no longer has
	$(GPU_PYTHON) -m pip install --quiet --no-index --no-deps --no-build-isolation --upgrade --target $(GPU_SITE) .

# The GPU default sweep (`mhabench run`, no config), timed from the shell: the whole command's wall time,
# start-up included, into $(GPU_CHECK_OUT)/sweep_wall.txt; the run's exit status is make's. With
# PROFILE=1 it runs under cProfile (mhabench.profiled; slower) and prints where the time went, by
# mhabench function. SKIP without a CUDA torch. Then (docs/gpu.md, "What the next GPU run must show"):
# SWEEPS-1 more back-to-back runs of it and their spread and advice across runs (answers that must not
# flip); with COUNTERS=1 the sweep under --counters hardware, timed; with ENERGY=N the sweep with N
# energy windows per ok row, timed.
SWEEP_PROFILE = $(filter 1,$(PROFILE))
SWEEPS ?= 3
COUNTERS ?=
ENERGY ?=
SWEEP_RUN = $(GPU_RUN) -m mhabench run --out $(GPU_CHECK_OUT)/results
TIMED = start=$$(date +%s%N); $(1); status=$$?; end=$$(date +%s%N); \
	echo "$(2): $$(( (end - start) / 1000000 )) ms wall" | tee -a $(GPU_CHECK_OUT)/sweep_wall.txt
gpu-sweep: gpu-site
	@mkdir -p $(GPU_CHECK_OUT)
	@$(GPU_RUN) -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || \
	  { echo "gpu-sweep: SKIP ($(GPU_PYTHON) has no torch that sees a CUDA device)"; exit 0; }; \
	rm -f $(GPU_CHECK_OUT)/sweep_wall.txt; \
	start=$$(date +%s%N); \
	$(GPU_RUN) -m $(if $(SWEEP_PROFILE),mhabench.profiled $(GPU_CHECK_OUT)/sweep.prof,mhabench) run --out $(GPU_CHECK_OUT)/results; \
	status=$$?; end=$$(date +%s%N); \
	echo "mhabench run (GPU default sweep): $$(( (end - start) / 1000000 )) ms wall$(if $(SWEEP_PROFILE), under cProfile)" \
	  | tee -a $(GPU_CHECK_OUT)/sweep_wall.txt; \
	[ $$status -eq 0 ] || exit $$status; \
	for i in $$(seq 2 $(SWEEPS)); do $(call TIMED,$(SWEEP_RUN),mhabench run (GPU default sweep $$i of $(SWEEPS))); \
	  [ $$status -eq 0 ] || exit $$status; done; \
	if [ $(SWEEPS) -gt 1 ]; then \
	  runs=$$(ls -d $(GPU_CHECK_OUT)/results/*-default-gpu* 2>/dev/null | tail -n $(SWEEPS)); \
	  $(GPU_RUN) -m mhabench spread $$runs | tee $(GPU_CHECK_OUT)/sweep_spread.txt; \
	  $(GPU_RUN) -m mhabench advise $$runs --format markdown > $(GPU_CHECK_OUT)/sweep_advice.md; \
	fi; \
	$(if $(COUNTERS),$(call TIMED,$(SWEEP_RUN) --counters hardware,mhabench run --counters hardware);) \
	$(if $(ENERGY),$(call TIMED,$(SWEEP_RUN) --energy-windows $(ENERGY),mhabench run --energy-windows $(ENERGY));) \
	exit $$status

# fp8 beside bf16 (configs/gpu-fp8.yaml: fused_fp8 and fused, n 4k-16k, b 1 and 8), into $(GPU_CHECK_OUT)/fp8.
gpu-fp8: gpu-site
	$(GPU_RUN) -m mhabench run configs/gpu-fp8.yaml --out $(GPU_CHECK_OUT)/fp8

# Every open GPU question of docs/gpu.md within BUDGET seconds, the install included: the steps run by value per
# second, each cut at what is left of the budget (mhabench.checks.evidence_run); one archive, rewritten after each
# step, at $(OUT)/gpu-evidence.tgz; read it anywhere with python -m mhabench.checks.evidence ARCHIVE.
# PREVIOUS=an earlier archive prices each step by its wall time there instead of the recorded estimate.
# The budget's clock starts when make reads this file, before gpu-site installs.
.PHONY: gpu-evidence
BUDGET ?= 480
OUT ?= gpu-evidence
ifneq ($(filter gpu-evidence,$(MAKECMDGOALS)),)
EVIDENCE_START := $(shell date +%s.%N)
endif
gpu-evidence: gpu-site
	$(GPU_RUN) -m mhabench.checks.evidence_run --budget $(BUDGET) --started-at $(EVIDENCE_START) \
	  --archive $(OUT)/gpu-evidence.tgz --work build/gpu-evidence $(if $(PREVIOUS),--previous $(PREVIOUS))

clean:
	rm -rf $(VENV) build *.egg-info
