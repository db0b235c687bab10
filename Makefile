# paperworks: two commands set up and run everything on a fresh machine:
#   make demo   the main job on the embedded stack
#   make test   the whole test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# `python -m` puts the working directory first on sys.path, and this checkout's kernels/ folder
# would then shadow the `kernels` package transformers imports; Python 3.11 leaves it off with this.
export PYTHONSAFEPATH := 1

.PHONY: demo test proto deploy-files up down status bench lint clean

$(STAMP): pyproject.toml setup.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (paperworks needs Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m paperworks.shared.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

proto: $(STAMP)
	$(BIN)/python -m paperworks.shared.protogen

deploy-files: $(STAMP)
	$(BIN)/python -m paperworks.shared.deploy

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
