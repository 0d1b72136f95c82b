# Every target carries a `## help` line; `make help` lists them.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.DEFAULT_GOAL := help
.PHONY: help install run test lint format bench clean

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

lint: install ## Check style and common bugs with ruff
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install ## Rewrite the code in the project's style
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install ## Measure the engine, the gateway and the telemetry spine (writes docs/benchmarks.md)
	$(PY) -m bench

clean: ## Remove the virtual environment and runtime data
	rm -rf $(VENV) data/spool data/published data/reports data/*.duckdb
