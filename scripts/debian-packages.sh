#!/usr/bin/env bash
# The Debian packages `make demo` and `make test` need (Java, mosquitto, sshd, ping, tc, iptables, sudo,
# chromium), installed when missing. Called by scripts/bootstrap.sh.
# Installing needs root: as root, or with sudo that needs no password. Otherwise the packages are skipped with a
# note: the simulator (`gesscale simulate`, `compare`, `experiment run` with environment: sim) needs none of
# them, so `make setup` stays root-free for it; `make demo` and `make test` run as root (README).
set -euo pipefail

need_pkgs=()
command -v java >/dev/null 2>&1 || need_pkgs+=(openjdk-17-jre-headless)
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need_pkgs+=(mosquitto)
[ -x /usr/sbin/sshd ] || need_pkgs+=(openssh-server)
command -v ping >/dev/null 2>&1 || need_pkgs+=(iputils-ping)
command -v tc >/dev/null 2>&1 || need_pkgs+=(iproute2)
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || need_pkgs+=(iptables)  # userspace WAN emulation (NFQUEUE)
command -v sudo >/dev/null 2>&1 || need_pkgs+=(sudo)  # become on the SSH test fleet (tests/fleet)
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)  # headless check of report.html (tests/experiment)
[ ${#need_pkgs[@]} -gt 0 ] || exit 0
if [ "$(id -u)" -eq 0 ]; then
  SUDO=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=sudo
else
  echo "bootstrap: not root (and no password-less sudo): skipping the Debian packages ${need_pkgs[*]};" \
    "the simulator needs none of them; 'make demo' and 'make test' install them when run as root"
  exit 0
fi
echo "bootstrap: installing Debian packages: ${need_pkgs[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
