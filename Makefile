# helpline — the only entry points: make run, make test, make lint, make bench.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench eval install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## Start the embedded database, migrate, seed the demo team, serve on :8000.
run: $(STAMP)
	$(BIN)/helpline demo
	$(BIN)/helpline serve

## Lint, type-check and run the whole test suite.
test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m bench

## The agent evaluation alone (quality figures and latency through the chat API).
eval: $(STAMP)
	$(BIN)/python -m bench.agent_eval.run_chat

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
