# paperworks: two commands set up and run everything on a fresh machine:
#   make demo   the main job on the embedded stack
#   make test   the whole test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# `python -m` puts the working directory first on sys.path, and this checkout's kernels/ folder
# would then shadow the `kernels` package transformers imports; PYTHONSAFEPATH leaves it off.
# (Scripts are fine: they get their own folder, which the benchmarks' sibling imports rely on.)
RUN_MODULE := PYTHONSAFEPATH=1 $(BIN)/python -m
# glibc serves blocks above its mmap threshold (at most 32 MiB by default) with fresh pages and
# unmaps them when freed; CPU training allocates such blocks (3D-convolution buffers) on every
# step, and the page faults cost the segmenter's U-Net a quarter of its CPU time (0.30 -> 0.22
# CPU-s per step). Keeping freed memory in the heap did not raise peak memory (segmenter suite:
# max RSS 1.20 -> 1.25 GB) and took the segmenter's tests from 216 to 171 CPU-s.
KEEP_HEAP  := MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=2147483648

.PHONY: demo test proto deploy-files up down status bench gpu-check lint clean

$(STAMP): pyproject.toml setup.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (paperworks needs Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[server,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(KEEP_HEAP) $(RUN_MODULE) paperworks.shared.devstack.demo

test: $(STAMP)
	$(KEEP_HEAP) $(RUN_MODULE) pytest -q --durations=25 -n 2 --dist loadfile --no-loadscope-reorder

proto: $(STAMP)
	$(RUN_MODULE) paperworks.shared.devstack.protogen

deploy-files: $(STAMP)
	$(RUN_MODULE) paperworks.shared.devstack.deploy

up: $(STAMP)
	$(BIN)/paperworks up

down: $(STAMP)
	$(BIN)/paperworks down

status: $(STAMP)
	$(BIN)/paperworks status

bench: $(STAMP)
	$(BIN)/python tests/benchmarks/run_all.py

# on a machine with an NVIDIA GPU: kernel parity and speed, each service's smallest job on cuda:0
# and on cpu; writes tests/benchmarks/results/gpu_check.{json,md} (exits 3 without a GPU)
gpu-check: $(STAMP)
	timeout 300 $(BIN)/python tests/gpu/gpu_check.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(RUN_MODULE) paperworks.shared.devstack.import_contracts

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
