# The README's two commands: `make run` and `make test`. Each creates .venv when it is
# missing and installs what it needs (the stamp file re-installs when pyproject.toml changes).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PYTEST_ARGS ?=

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

## run: the main job (grows with the project: today the remoting benchmark)
run: $(STAMP)
	$(BIN)/python benchmarks/remoting_bench.py

## lint: ruff, import contracts, mypy --strict on the core layers
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy --strict aiorocketmq/common aiorocketmq/runtime aiorocketmq/remoting

## test: lint, then the whole suite
test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## bench: every benchmark, figures printed
bench: $(STAMP)
	$(BIN)/python benchmarks/remoting_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
