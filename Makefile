# The README's two commands: `make run` and `make test`. Each creates .venv when it is
# missing and installs what it needs (the stamp file re-installs when pyproject.toml changes).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PYTEST_ARGS ?=
# Stock Node.js client (ali-ons) for the interop tests, pinned by package-lock.json.
NODE_DIR   := tests/interop/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed
NAMESRV_PORT ?= 9876

.PHONY: run test lint bench clean interop-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,analytics]'
	touch $@

## run: the main job: a name server on port $(NAMESRV_PORT) and broker-a on 10911, store
## under ./data, in the foreground; Ctrl-C stops both cleanly
run: $(STAMP)
	BIN=$(BIN) NAMESRV_PORT=$(NAMESRV_PORT) deploy/local/run.sh

## lint: ruff, import contracts, mypy --strict on the core layers
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy --strict aiorocketmq/common aiorocketmq/runtime aiorocketmq/remoting \
		aiorocketmq/store aiorocketmq/namesrv aiorocketmq/broker aiorocketmq/cli/namesrv.py \
		aiorocketmq/cli/broker.py aiorocketmq/admin aiorocketmq/cli/admin.py aiorocketmq/client

## interop-deps: ali-ons for tests/interop when npm exists (CI has Node); idempotent
interop-deps:
	@if command -v npm >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(NODE_STAMP); \
	else \
		echo "npm not found: the ali-ons interop test will be skipped"; \
	fi

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error
	touch $@

## test: lint, then the whole suite
test: lint interop-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## bench: every benchmark, figures printed
bench: $(STAMP)
	$(BIN)/python benchmarks/remoting_bench.py
	$(BIN)/python benchmarks/namesrv_bench.py
	$(BIN)/python benchmarks/store_bench.py
	$(BIN)/python benchmarks/message_store_bench.py
	$(BIN)/python benchmarks/client_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis $(NODE_DIR)/node_modules
