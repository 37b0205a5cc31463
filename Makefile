# agent-tui — `make run` launches the app, `make test` runs every test, `make check` is CI.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Published MCP servers the tests run against (installed with npm into a git-ignored folder).
NPM_DIR := .mcp-npm
NPM_SERVERS := @modelcontextprotocol/server-everything@2026.8.31 \
	@modelcontextprotocol/server-filesystem@2026.8.31
NPM_STAMP := $(NPM_DIR)/.installed

.PHONY: run test check mcp-servers format lint typecheck bench screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

$(NPM_STAMP): Makefile
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix $(NPM_DIR) $(NPM_SERVERS) && touch $@; \
	else echo "warning: npm is missing; the tests against published MCP servers will be skipped"; fi

mcp-servers: $(NPM_STAMP)

run: $(STAMP)
	$(BIN)/agent-tui $(ARGS)

test: $(STAMP) $(NPM_STAMP)
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

screenshots: $(STAMP)
	$(BIN)/python screenshots/make_screenshots.py

clean:
	rm -rf $(VENV) build *.egg-info
