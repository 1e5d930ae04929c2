# The two set-up commands of the README. Both bootstrap a fresh machine themselves.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint lock lock-check clean

setup:
	@bash scripts/bootstrap.sh

# The demo needs no test tools: bootstrap's `demo` stage leaves out the dev extra and its bytecode.
demo:
	@bash scripts/bootstrap.sh demo
	$(BIN)/gesscale demo $(ARGS)

# The whole suite: the tests that start services, and beside them at nice 19 those that start none
# (tests/run_split.py); PYTEST_ARGS naming tests runs just those.
test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m tests.run_split $(PYTEST_ARGS)

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
