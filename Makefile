# Two commands do everything on a fresh clone:
#   make demo   creates .venv if missing (Python >= 3.12), installs icl-race, runs the CPU demo
#   make test   the same environment, then the test suite (what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-stored-ulp test-slurm bench lint roofline-gpu

CHECK_PYTHON = @$(PYTHON) -c 'import sys; v = sys.version_info; sys.exit(0 if v >= (3, 12) else f"icl-race needs Python >= 3.12, $(PYTHON) is {v.major}.{v.minor}: run make PYTHON=python3.12 ...")'

$(BIN)/icl-race: pyproject.toml
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $@

# Ends with the next command to type (README, *Next*).
demo: $(BIN)/icl-race
	$(BIN)/icl-race demo
	@echo "next: $(BIN)/icl-race report runs/demo   # report.md with every table and figure; also hist runs/demo, export runs/demo --out tables/"

# Two pytest worker processes (pytest-xdist), whole files to each: the tiny runs of the tests keep one core
# busy at a time, so two workers use CI's two cores (that is why two remain). The one-process crash that
# splitting once also avoided (a segfault in XLA's CPU compiler at about the 290th test) came with resident
# memory growing ~44 MB per compiled program, never released: tests/conftest.py now drops JAX's compilation
# caches after each test module, which keeps a process flat (benchmarks/RESULTS.md, issue 23). A crashed
# worker would fail its test; xdist says so and goes on.
# The 20 slowest tests are listed at the end, to keep the suite within its ~10 minutes.
test: $(BIN)/icl-race
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=20 tests

# The tests that compare with numbers stored earlier (every file reading them through tests/stored.py's
# load), once more with each stored float moved by one ulp: none may depend on the last bit, as none can
# on another CPU (issue 53). CI runs it after the suite.
test-stored-ulp: $(BIN)/icl-race
	ICL_RACE_STORED_ULP=1 $(BIN)/python -m pytest -n 2 --dist loadfile $(shell grep -rl --include="test_*.py" "stored\.load" tests)

# A sweep through `--executor slurm` against a real single-node Slurm (tests/run/sweep/test_slurm.py, ~1-1.5 min on 2
# cores): as root on Debian 12, .ci/slurm/install.sh and .ci/slurm/start.sh first, .ci/slurm/stop.sh after.
# The test skips, saying why, where no Slurm controller answers; CI runs it after the suite (.ci/run).
test-slurm: $(BIN)/icl-race
	$(BIN)/python -m pytest -rs --durations=5 tests/run/sweep/test_slurm.py

# The formatter and the linter (ruff) clean on the whole tree, and the type checker (mypy, checking the
# bodies of unannotated functions too) at zero errors over the package; all configured in pyproject.toml.
# CI runs these first.
lint: $(BIN)/icl-race
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/python -m mypy

bench: $(BIN)/icl-race
	$(BIN)/icl-race bench

# The step's roofline as XLA's GPU compiler builds it for an H100 and an H200, on this machine without a GPU
# (benchmarks/roofline.py, --target): its own environment, so that the main one never meets the CUDA plugin.
GPU_COMPILE := .venv-gpu-compile
$(GPU_COMPILE)/bin/python: pyproject.toml
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(GPU_COMPILE)
	$(GPU_COMPILE)/bin/python -m pip install -q -e '.[gpu-compile]'
	@touch $@

roofline-gpu: $(GPU_COMPILE)/bin/python
	for chip in h100 h200; do \
	  $(GPU_COMPILE)/bin/python benchmarks/roofline.py --target $$chip --seeds 4,256,1024 --out benchmarks/results-roofline-$$chip.json && \
	  $(GPU_COMPILE)/bin/python benchmarks/roofline.py --target $$chip --seeds 256 --systems paper,regime --kernel pallas --out benchmarks/results-roofline-pallas-$$chip.json || exit 1; \
	done
