# The two set-up commands of the README. Both bootstrap a fresh machine themselves.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint lock lock-check clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(BIN)/gesscale demo $(ARGS)

test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

# Refresh uv.lock and requirements-lock.txt after editing pyproject.toml (ARGS=--upgrade: newest releases).
lock:
	@bash scripts/lock.sh $(ARGS)

# Fails when the lock no longer matches pyproject.toml (offline); tests/test_lock.py runs it in CI.
lock-check:
	@bash scripts/lock.sh --check

clean:
	rm -rf out .pytest_cache
