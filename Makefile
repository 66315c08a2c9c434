# Quick start: `make demo` profiles the bundled example; `make test` runs the tests.
# `make install` is a user's install (the tool and what it runs); `make dev` adds the
# developer's (pytest, ruff, the architecture checks, a notebook kernel), which `make test`
# and `make lint` install first; `make test-extras` the optional libraries that some tests
# set profile-all beside (HTA, TensorBoard's plugin, Lightning, HuggingFace's Trainer).
# Each creates .venv when it is absent. torch is installed first, pinned, only when the
# venv lacks it: a bare `torch>=2.2` resolved from scratch would pull a multi-GB CUDA build.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0

.PHONY: install dev compiled hta tb-plugin frameworks test-extras demo test lint bench \
	gpu-check clean

$(BIN)/profile-all: pyproject.toml setup.py src/profile_all/_region_fast.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install "$(TORCH_PIN)"
	$(BIN)/python -m pip install -e .
	touch $@

$(VENV)/.dev: $(BIN)/profile-all
	$(BIN)/python -m pip install -e ".[dev]"
	touch $@

# An editable install leaves the sources uncompiled, and where PYTHONDONTWRITEBYTECODE is
# set nothing compiles them: every command compiled its 150 modules again (0.1 s of each
# run, ingest and test). What pip writes for a wheel, written here; stale files are
# recompiled by Python as usual.
compiled: $(BIN)/profile-all
	$(BIN)/python -m compileall -q src

install: $(BIN)/profile-all compiled
	@echo "profile-all is $(BIN)/profile-all: '. $(BIN)/activate' puts it on the PATH"

dev: $(VENV)/.dev compiled

# Holistic Trace Analysis, for the test and script that set profile-all's trace analyses
# beside HTA's own (scripts/checks/against_hta.py): without its jupyterlab requirement,
# which computing needs not
hta: dev
	$(BIN)/python -m pip install --no-deps "HolisticTraceAnalysis==0.5.0" pydot pyyaml networkx
	$(BIN)/python -m pip install plotly  # HTA imports it (profile-all no longer needs it)

# TensorBoard's profiler plugin (torch-tb-profiler, with tensorboard), for the test and
# script that set profile-all's views beside the plugin's own (scripts/checks/against_tb_plugin.py)
tb-plugin: dev
	$(BIN)/python -m pip install "torch-tb-profiler==0.4.3"

# PyTorch Lightning and HuggingFace's Trainer, for the tests of their integrations
frameworks: dev
	$(BIN)/python -m pip install -e ".[lightning,huggingface]"

test-extras: hta tb-plugin frameworks

demo: install
	$(BIN)/profile-all run scripts/examples/train_mlp.py -- --steps 100

lint: dev
	$(BIN)/ruff check .

test: dev
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python scripts/bench/region_overhead.py
	$(BIN)/python scripts/bench/timing_distortion.py
	$(BIN)/python scripts/bench/trace_ingest.py
	$(BIN)/python scripts/bench/latency_agreement.py
	$(BIN)/python scripts/bench/fresh_latency.py
	$(BIN)/python scripts/bench/ingest_memory.py
	$(BIN)/python scripts/bench/compare_noise.py
	OMP_NUM_THREADS=1 $(BIN)/python scripts/bench/fast_by_default.py
	OMP_NUM_THREADS=1 $(BIN)/python scripts/bench/torch_profiler_cost.py
	OMP_NUM_THREADS=1 $(BIN)/python scripts/bench/sampling_overhead.py
	$(BIN)/python scripts/bench/ingest_vs_hta.py

# every GPU path end to end with a verdict table; on a machine without CUDA: what it skipped
gpu-check: install
	$(BIN)/python scripts/gpu_check/check.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache src/*.egg-info
	find src -name __pycache__ -prune -exec rm -rf {} +
