#!/bin/sh
# Installs a single-node Slurm's packages (Debian 12: slurm-wlm 22.05, munge, slurmdbd, MariaDB) for
# tests/run/sweep/test_slurm.py. Needs root and apt. Recommends are left out: they would add 34 packages (hdf5,
# rocm-smi, ipmi...) that a one-node Slurm never uses. dpkg says "invoke-rc.d: policy-rc.d denied
# execution of start" without systemd: harmless, start.sh starts the daemons itself.
# Exit 0 when installed (or already there); otherwise one line on stderr saying why, exit 1.
set -eu
if command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null; then
    exit 0
fi
[ "$(id -u)" = 0 ] || { echo "slurm install: needs root (this is uid $(id -u))" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "slurm install: needs apt-get (Debian's packages)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
log=${TMPDIR:-/tmp}/slurm-install.log
# The package lists may be missing on a fresh image: update them only when the install cannot find a package.
if ! apt-get install -y -q --no-install-recommends slurm-wlm munge slurmdbd mariadb-server >"$log" 2>&1; then
    apt-get update -q >>"$log" 2>&1 || true
    apt-get install -y -q --no-install-recommends slurm-wlm munge slurmdbd mariadb-server >>"$log" 2>&1 || {
        echo "slurm install: apt-get install failed: $(grep -m1 -E '^E:' "$log" || tail -n1 "$log")" >&2
        exit 1
    }
fi
