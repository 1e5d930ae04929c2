#!/usr/bin/env bash
# The dependency lock. `uv.lock` pins every package `pip install -e '.[dev]'` would install (all platforms,
# Python >= 3.11, with hashes), resolved by uv from pyproject.toml; `requirements-lock.txt` is its export that
# pip installs from (--require-hashes) when uv cannot be had. scripts/bootstrap.sh installs from them.
#
#   scripts/lock.sh            refresh after editing pyproject.toml (`make lock`; unchanged packages keep their pins)
#   scripts/lock.sh --upgrade  refresh and move every package to its newest allowed release (`make lock ARGS=--upgrade`)
#   scripts/lock.sh --check    offline; fails if either file no longer matches pyproject.toml (`make lock-check`, CI)
set -euo pipefail
cd "$(dirname "$0")/.."

UV=${UV:-}
if [ -z "$UV" ]; then
  if [ -x .venv/bin/uv ]; then UV=.venv/bin/uv
  elif command -v uv >/dev/null 2>&1; then UV=uv
  else
    echo "lock: uv not found: run 'bash scripts/bootstrap.sh' (it installs uv into .venv) or set UV=/path/to/uv" >&2
    exit 2
  fi
fi

export_lock() {
  # Printed to stdout so that the file's header names the same command whoever runs it.
  "$UV" export --quiet --frozen --extra dev --no-emit-project --format requirements-txt
}

if [ "${1:-}" = "--check" ]; then
  if ! "$UV" lock --check --offline --quiet; then
    echo "lock: uv.lock is stale (pyproject.toml changed since it was written): run 'make lock' and commit both files" >&2
    exit 1
  fi
  if ! export_lock | cmp -s - requirements-lock.txt; then
    echo "lock: requirements-lock.txt is not the export of uv.lock: run 'make lock' and commit both files" >&2
    exit 1
  fi
  echo "lock: uv.lock and requirements-lock.txt match pyproject.toml"
  exit 0
fi

"$UV" lock "$@"
export_lock > requirements-lock.txt.tmp
mv requirements-lock.txt.tmp requirements-lock.txt
echo "lock: wrote uv.lock and requirements-lock.txt; commit both"
