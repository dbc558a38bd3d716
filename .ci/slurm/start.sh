#!/bin/sh
# Starts a single-node Slurm on this machine without systemd, for tests/run/sweep/test_slurm.py:
#   munged, mariadbd + slurmdbd (accounting), slurmctld, slurmd; then waits until the node is idle.
# Needs root and the packages of install.sh. stop.sh stops it all again.
# Accounting is on by default: submitit learns from `sacct` that a cancelled or failed job has ended;
# without it such a job's result() blocks forever (successful jobs still return).
# Env: SLURM_CI_DIR         state, logs and pid files (default /tmp/slurm-ci)
#      SLURM_CI_ACCOUNTING  1 (default): MariaDB + slurmdbd; 0: no accounting, lighter
#      SLURM_CI_TIMEOUT     seconds to wait for each daemon (default 60)
# The config goes to /etc/slurm/slurm.conf (+ slurmdbd.conf), where sbatch, squeue, sacct and srun look
# when SLURM_CONF is unset: the tests need no environment of their own.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
D=${SLURM_CI_DIR:-/tmp/slurm-ci}
ACCT=${SLURM_CI_ACCOUNTING:-1}
TMO=${SLURM_CI_TIMEOUT:-60}
ETC=/etc/slurm
HOST=$(hostname -s)
CPUS=$(nproc)
# RealMemory above what slurmd detects makes the node INVALID (drained): 90% of MemTotal, in MB.
MEM=$(awk '/^MemTotal:/ {printf "%d", $2/1024*0.9}' /proc/meminfo)

waitfor() {  # $1 = what, then a command that succeeds once it is ready
    what=$1; shift; n=0
    until "$@" >/dev/null 2>&1; do
        n=$((n+1))
        if [ $n -gt $((TMO*10)) ]; then echo "slurm start: $what not ready after ${TMO}s" >&2; return 1; fi
        sleep 0.1
    done
}

# A second slurmctld could not bind its port; say so rather than fail in its log.
if [ -s "$D/slurmctld.pid" ] && kill -0 "$(cat "$D/slurmctld.pid")" 2>/dev/null; then
    echo "slurm start: already running (pid $(cat "$D/slurmctld.pid")); run $HERE/stop.sh first" >&2
    exit 1
fi

mkdir -p "$D/ctld" "$D/d" "$ETC"
if [ "$ACCT" = 1 ]; then
    ACCTLINES="AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1"
else
    ACCTLINES="AccountingStorageType=accounting_storage/none"
fi
sed -e "s|@HOST@|$HOST|g" -e "s|@CPUS@|$CPUS|g" -e "s|@MEM@|$MEM|g" -e "s|@STATE@|$D|g" \
    -e "s|@ACCT@|$ACCTLINES|" "$HERE/slurm.conf.in" >"$ETC/slurm.conf"

# munge. Debian's postinst creates the key; make one if it is missing. Without systemd nothing creates
# /run/munge (its RuntimeDirectory=): create it, and run munged as the munge user (it daemonizes).
if [ ! -s /etc/munge/munge.key ]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    runuser -u munge -- /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0600 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
    waitfor munged sh -c 'munge -n | unmunge'
fi

# Accounting: MariaDB + slurmdbd.
if [ "$ACCT" = 1 ]; then
    # mariadbd runs as mysql: its pid and log go to a folder it owns (in a root-owned one it exits
    # without a word); /run/mysqld is systemd's to create otherwise.
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    install -d -o mysql -g mysql -m 0750 "$D/mysql"
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    # It does not daemonize: setsid and & detach it. The unix socket only, a small buffer pool.
    setsid /usr/sbin/mariadbd --user=mysql --skip-networking \
        --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 \
        --pid-file="$D/mysql/mariadb.pid" --log-error="$D/mysql/mariadb.log" \
        </dev/null >/dev/null 2>&1 &
    waitfor mariadb mariadb -e 'select 1'
    # slurmctld -c below numbers jobs from 1 again: old accounting rows would collide, so start empty.
    mariadb -e 'DROP DATABASE IF EXISTS slurm_acct_db'
    sed -e "s|@HOST@|$HOST|g" -e "s|@STATE@|$D|g" "$HERE/slurmdbd.conf.in" >"$ETC/slurmdbd.conf"
    chmod 0600 "$ETC/slurmdbd.conf"  # slurmdbd refuses a conf that others may read
    /usr/sbin/slurmdbd
    waitfor slurmdbd sacctmgr -n list cluster
    sacctmgr -n list cluster format=cluster | grep -qw ci || sacctmgr -i add cluster ci >/dev/null
fi

# Slurm itself: -c a fresh job state, -i past state errors ignored; both daemonize.
/usr/sbin/slurmctld -c -i
/usr/sbin/slurmd
if ! waitfor "the node (idle)" sh -c "sinfo -h -o '%T' | grep -qx idle"; then
    sinfo -N -l >&2 || true
    scontrol show node "$HOST" >&2 || true
    tail -n 30 "$D/slurmctld.log" "$D/slurmd.log" >&2 || true
    exit 1
fi
sinfo
