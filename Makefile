# The two set-up commands of the README. Both bootstrap a fresh machine themselves.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(BIN)/gesscale demo $(ARGS)

test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf out .pytest_cache
