# agent-tui — `make run` sets up and opens the app, `make install` puts `agent-tui` on PATH,
# `make test` runs every test, `make check` is CI.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Published MCP servers the tests run against (installed with npm into a git-ignored folder).
NPM_DIR := .mcp-npm
NPM_SERVERS := @modelcontextprotocol/server-everything@2026.8.31 \
	@modelcontextprotocol/server-filesystem@2026.8.31
NPM_STAMP := $(NPM_DIR)/.installed
RUN_STAMP := $(VENV)/.installed-run

# `make run` opens the folder you called make from (`cd ~/proj && make -C ~/agent-tui run`) or
# WORKSPACE; called from this checkout itself it opens a scratch folder instead, so the demo never
# writes into agent-tui's own sources.
CALLER := $(abspath $(PWD))
PLAYGROUND := $(HOME)/agent-tui-playground
WORKSPACE ?= $(if $(filter $(CALLER),$(CURDIR)),$(PLAYGROUND),$(CALLER))

# `make install`: a dedicated virtualenv and a link to its command in a folder on PATH.
# PIP_OPTIONS="--no-index --find-links DIR" installs without the network from a wheelhouse
# (`make wheelhouse` fills .wheelhouse; `make test` does, for the offline install test).
PREFIX ?= $(HOME)/.local
INSTALL_VENV := $(PREFIX)/share/agent-tui/venv
INSTALL_BIN := $(PREFIX)/bin
PIP_OPTIONS ?=
WHEELHOUSE := .wheelhouse
WHEELHOUSE_STAMP := $(WHEELHOUSE)/.ready

.PHONY: run install uninstall wheelhouse test check mcp-servers format lint typecheck bench screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Running needs only the package and its dependencies; tests and tools come with `make test`.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -m compileall -q tui runtime themes
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	$(BIN)/python -m compileall -q tui runtime themes
	touch $(STAMP) $(RUN_STAMP)

$(NPM_STAMP): Makefile
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix $(NPM_DIR) $(NPM_SERVERS) && touch $@; \
	else echo "warning: npm is missing; the tests against published MCP servers will be skipped"; fi

mcp-servers: $(NPM_STAMP)

# Wheels of agent-tui's dependencies, pip and its build backend: `make install` from these
# needs no network (setup may use it; tests may not).
$(WHEELHOUSE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip wheel --quiet --wheel-dir $(WHEELHOUSE) .
	$(BIN)/python -m pip download --quiet --dest $(WHEELHOUSE) pip 'setuptools>=77'
	touch $@

wheelhouse: $(WHEELHOUSE_STAMP)

run: $(RUN_STAMP)
	@# Only the scratch folder is made: a WORKSPACE that does not exist (a typo) is refused by
	@# agent-tui with one line, not created.
	@if [ "$(WORKSPACE)" = "$(PLAYGROUND)" ]; then mkdir -p "$(WORKSPACE)"; fi
	@echo "agent-tui on $(WORKSPACE)   (another folder: make run WORKSPACE=~/proj)"
	$(BIN)/agent-tui --workspace "$(WORKSPACE)" $(ARGS)

install:
	$(PYTHON) -m venv "$(INSTALL_VENV)"
	"$(INSTALL_VENV)/bin/python" -m pip install --quiet $(PIP_OPTIONS) --upgrade pip
	"$(INSTALL_VENV)/bin/python" -m pip install --quiet $(PIP_OPTIONS) "$(CURDIR)"
	mkdir -p "$(INSTALL_BIN)"
	ln -sf "$(INSTALL_VENV)/bin/agent-tui" "$(INSTALL_BIN)/agent-tui"
	@echo "installed: $(INSTALL_BIN)/agent-tui"
	@case ":$$PATH:" in *":$(INSTALL_BIN):"*) ;; \
	  *) echo "add $(INSTALL_BIN) to PATH, e.g.: echo 'export PATH=\"$(INSTALL_BIN):\$$PATH\"' >> ~/.bashrc";; esac

uninstall:
	rm -f "$(INSTALL_BIN)/agent-tui"
	rm -rf "$(PREFIX)/share/agent-tui/venv"

test: $(STAMP) $(NPM_STAMP) $(WHEELHOUSE_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider; status=$$?; \
	if [ $$status -eq 5 ]; then echo "no tests were collected: failing"; exit 1; fi; exit $$status

format: $(STAMP)
	$(BIN)/ruff format runtime tui themes tests bench

lint: $(STAMP)
	$(BIN)/ruff format --check runtime tui themes tests bench
	$(BIN)/ruff check runtime tui themes tests bench
	@if grep -rEn '^\s*(from|import)\s+(textual|rich|tui|themes)\b' runtime --include='*.py'; then \
		echo "runtime/ must not import textual, rich, tui or themes"; exit 1; fi

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(STAMP)
	$(BIN)/python bench/store_bench.py
	$(BIN)/python bench/engine_bench.py
	$(BIN)/python bench/stream_bench.py
	$(BIN)/python bench/browser_bench.py
	$(BIN)/python bench/ui_bench.py
	$(BIN)/python bench/pty_bench.py
	$(BIN)/python bench/mention_bench.py

screenshots: $(STAMP)
	$(BIN)/python screenshots/make_screenshots.py

clean:
	rm -rf $(VENV) build *.egg-info $(WHEELHOUSE)
