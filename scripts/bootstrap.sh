#!/usr/bin/env bash
# Installs everything `make demo` and `make test` need on a fresh Debian 12 machine:
# Debian packages (Java, mosquitto, sshd, ping) when missing, then .venv with the project; `test` (the default)
# adds the dev tools. `bootstrap.sh demo` (what `make demo` runs) installs and compiles only what the demo runs (no
# test tools, no bytecode for Ansible or the Kubernetes client); `make test` and `make setup` run the default.
# Re-running is cheap: each step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-test}
case "$MODE" in demo|test) ;; *) echo "bootstrap: usage: bootstrap.sh [demo|test]" >&2; exit 2 ;; esac

step_t=$SECONDS
step_done() {  # $1: what was done; prints how long it took (the set-up's time, step by step)
  echo "bootstrap:   $1 in $((SECONDS - step_t)) s"
  step_t=$SECONDS
}
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
stamp=.venv/.gesscale-installed      # the lock without the dev extra: what the demo runs
dev_stamp=.venv/.gesscale-dev-installed  # the dev extra too: what the tests run
# Packages the demo never imports: their bytecode is compiled in the `test` stage, not in the `demo` one.
NOT_FOR_DEMO='/(ansible|ansible_collections|ansible_test|ansible_runner|kubernetes|pip|fabric|invoke|paramiko)/'
# Python packages come from the lock (uv.lock; requirements-lock.txt for pip), refreshed by `make lock`. The uv
# that wrote uv.lock is pinned here so that every machine reads it alike.
UV_VERSION=0.13.9
stale() {  # $1: a stamp; true when it is missing or older than the lock
  [ ! -f "$1" ] || [ pyproject.toml -nt "$1" ] || [ uv.lock -nt "$1" ] || [ requirements-lock.txt -nt "$1" ]
}
uv_ready() {  # uv in the venv and a lock that matches pyproject.toml
  [ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q "uv==$UV_VERSION" || return 1
  # A lock that no longer matches pyproject.toml is an error, not something to install around (offline, 0.3 s).
  if ! .venv/bin/uv lock --check --offline --quiet; then
    echo "bootstrap: uv.lock is stale (pyproject.toml changed since it was written): run 'make lock' and commit it" >&2
    exit 1
  fi
}
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# uv writes no .pyc (pip does), and where PYTHONDONTWRITEBYTECODE is set, as on this machine, every Spark Python
# worker would compile pyarrow, pandas and pyspark from source again inside its node's budget; on both cores.
compile_site() {  # $1: a regex of paths to leave out
  .venv/bin/python -m compileall -q -j 0 -x "$1" "$site" >/dev/null 2>&1 || true
}
pip_everything() {
  echo "bootstrap: uv did not work; installing requirements-lock.txt with pip instead"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements-lock.txt
  .venv/bin/python -m pip install -q --no-deps -e .
  touch "$stamp" "$dev_stamp"
}
if stale "$stamp"; then
  echo "bootstrap: installing Python packages from uv.lock (pyspark alone is ~490 MB; under a minute with uv, ~2 with pip)"
  # uv (from PyPI) fetches and installs in parallel: 36-41 s here against 2 min 11 s for pip, both with warm
  # caches. If uv cannot be had or fails, pip installs the same pins (dev tools included) from requirements-lock.txt.
  # --inexact: packages outside the lock (pip, uv itself, the dev tools) stay; --locked: never re-resolve.
  if uv_ready && .venv/bin/uv sync -q --locked --inexact; then
    step_done "installed"
    echo "bootstrap: compiling the packages' bytecode"
    compile_site "$NOT_FOR_DEMO"
    step_done "compiled"
    touch "$stamp"
  else
    pip_everything
  fi
fi
if [ "$MODE" = test ] && stale "$dev_stamp"; then
  echo "bootstrap: installing the dev tools from uv.lock (the test suite's)"
  if uv_ready && .venv/bin/uv sync -q --locked --inexact --extra dev; then
    # Ansible's 15 000-file collections stay out (only ansible-playbook reads them); what is compiled is skipped.
    compile_site '/ansible_collections/'
    step_done "installed and compiled"
    touch "$dev_stamp"
  else
    pip_everything
  fi
fi
# The project's own modules compiled too (they are imported by every Spark Python worker); cheap when current.
.venv/bin/python -m compileall -q gesscale jobs producer netem >/dev/null || true
# Spark's classes in a class-data-sharing archive, written once by a short local Spark run (jobs/cds.py): Spark
# JVMs then start in about half the time inside the fog nodes' CPU budgets. Never fatal.
step_t=$SECONDS
.venv/bin/python -m jobs.cds || echo "bootstrap: no class-data archive (Spark starts without it)"
step_done "class-data archive checked"
echo "bootstrap: ready in $SECONDS s"
