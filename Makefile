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

.PHONY: demo test proto deploy-files up down status bench lint clean

$(STAMP): pyproject.toml setup.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (paperworks needs Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(RUN_MODULE) paperworks.shared.demo

test: $(STAMP)
	$(RUN_MODULE) pytest -q

proto: $(STAMP)
	$(RUN_MODULE) paperworks.shared.protogen

deploy-files: $(STAMP)
	$(RUN_MODULE) paperworks.shared.deploy

up: $(STAMP)
	$(BIN)/paperworks up

down: $(STAMP)
	$(BIN)/paperworks down

status: $(STAMP)
	$(BIN)/paperworks status

bench: $(STAMP)
	$(BIN)/python tests/benchmarks/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
