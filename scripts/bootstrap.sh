#!/usr/bin/env bash
# Installs everything `make demo` and `make test` need on a fresh Debian 12 machine:
# Debian packages (Java, mosquitto, sshd, ping) when missing, then .venv with the project and its dev tools.
# Re-running is cheap: each step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/debian-packages.sh  # as root (or password-less sudo); skipped with a note otherwise
# Debian enables and starts mosquitto on install; our brokers are started on demand instead.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet mosquitto 2>/dev/null; then
  systemctl stop mosquitto || true
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.gesscale-installed
# Python packages come from the lock (uv.lock; requirements-lock.txt for pip), refreshed by `make lock`. The uv
# that wrote uv.lock is pinned here so that every machine reads it alike.
UV_VERSION=0.13.9
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ uv.lock -nt "$stamp" ] \
  || [ requirements-lock.txt -nt "$stamp" ]; then
  echo "bootstrap: installing Python packages from uv.lock (pyspark alone is ~490 MB; under a minute with uv, ~2 with pip)"
  # uv (from PyPI) fetches and installs in parallel: 36-41 s here against 2 min 11 s for pip, both with warm
  # caches. If uv cannot be had or fails, pip installs the same pins from requirements-lock.txt.
  if .venv/bin/python -m pip install -q "uv==$UV_VERSION"; then
    # A lock that no longer matches pyproject.toml is an error, not something to install around (offline, 0.3 s).
    if ! .venv/bin/uv lock --check --offline --quiet; then
      echo "bootstrap: uv.lock is stale (pyproject.toml changed since it was written): run 'make lock' and commit it" >&2
      exit 1
    fi
    uv_ok=1
  else
    uv_ok=0
  fi
  # --inexact: packages outside the lock (pip, uv itself) stay; --locked: install exactly the lock, never re-resolve.
  if [ "$uv_ok" = 1 ] && .venv/bin/uv sync -q --locked --inexact --extra dev; then
    # uv writes no .pyc (pip does), and where PYTHONDONTWRITEBYTECODE is set, as on this machine, every Spark
    # Python worker would compile pyarrow, pandas and pyspark from source again inside its node's budget. All
    # but Ansible's 15 000-file collections (only ansible-playbook reads them), on both cores.
    echo "bootstrap: compiling the packages' bytecode"
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    .venv/bin/python -m compileall -q -j 0 -x '/ansible_collections/' "$site" >/dev/null 2>&1 || true
  else
    echo "bootstrap: uv did not work; installing requirements-lock.txt with pip instead"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r requirements-lock.txt
    .venv/bin/python -m pip install -q --no-deps -e .
  fi
  touch "$stamp"
fi
# The project's own modules compiled too (they are imported by every Spark Python worker); cheap when current.
.venv/bin/python -m compileall -q gesscale jobs producer netem >/dev/null || true
# Spark's classes in a class-data-sharing archive, written once by a short local Spark run (jobs/cds.py): Spark
# JVMs then start in about half the time inside the fog nodes' CPU budgets. Never fatal.
.venv/bin/python -m jobs.cds || echo "bootstrap: no class-data archive (Spark starts without it)"
