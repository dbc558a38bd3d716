#!/bin/sh
# Stops what start.sh started, each daemon by the pid in its pid file (never by name): the jobs first,
# then slurmd, slurmctld, slurmdbd, mariadbd, munged; TERM, then KILL after 15 s. Safe to run twice.
D=${SLURM_CI_DIR:-/tmp/slurm-ci}
stop() {  # $1 = a pid file
    [ -s "$1" ] || return 0
    pid=$(cat "$1")
    if kill -TERM "$pid" 2>/dev/null; then
        i=0
        while kill -0 "$pid" 2>/dev/null; do
            i=$((i+1))
            if [ $i -gt 150 ]; then kill -KILL "$pid" 2>/dev/null; break; fi
            sleep 0.1
        done
    fi
    rm -f "$1"
}
scancel --user=root 2>/dev/null || true
stop "$D/slurmd.pid"
stop "$D/slurmctld.pid"
stop "$D/slurmdbd.pid"
stop "$D/mysql/mariadb.pid"
stop /run/munge/munged.pid
