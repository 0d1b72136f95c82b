# Every target carries a `## help` line; `make help` lists them.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.DEFAULT_GOAL := help
# LiteLLM, the benchmark's peer, lives in a virtual environment of its own: it is never a
# dependency of Switchover. Pinned, so that every run compares against the same release.
LITELLM_VERSION := 1.110.2
BENCH_VENV := bench/.venv-litellm
BENCH_STAMP := $(BENCH_VENV)/.installed-litellm-$(LITELLM_VERSION)

.PHONY: help install run test lint format bench bench-venv clean

help: ## List the targets with what they do
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## Create .venv and install Switchover with its test tools

run: install ## Start Switchover (the demo providers and traffic when no real keys are configured)
	$(BIN)/switchover up

test: install ## Run the whole test suite (unit, contract and end-to-end over loopback)
	$(BIN)/pytest

lint: install ## Check style and common bugs with ruff, and the engine's layers with import-linter
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: install ## Rewrite the code in the project's style
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

$(BENCH_STAMP):
	@test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet 'litellm==$(LITELLM_VERSION)'
	@rm -f $(BENCH_VENV)/.installed-* && touch $@

bench-venv: $(BENCH_STAMP) ## Create bench/.venv-litellm with LiteLLM, the benchmark's peer

bench: install bench-venv ## Measure the engine (against LiteLLM), outages, the gateway and the telemetry (writes docs/benchmarks.md)
	$(PY) -m bench

# The files of data/ that are tracked (git ls-files data/); `clean` removes everything else there,
# whatever the product or the demo wrote (tests/test_make_clean.py keeps this list true).
DATA_KEEP := demo.toml demo-cases.toml

clean: ## Remove the virtual environments and runtime data (all of data/ but the files shipped there)
	rm -rf $(VENV) $(BENCH_VENV)
	test ! -d data || find data -mindepth 1 -maxdepth 1 $(foreach f,$(DATA_KEEP),! -name '$(f)') -exec rm -rf {} +
