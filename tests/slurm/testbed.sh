#!/usr/bin/env bash
# hpcjobs one-node Slurm testbed (Debian 12, Slurm 22.05, no systemd needed).
#
# Usage (as root):  bash tests/slurm/testbed.sh {install|start|install-and-start|stop|reset|status}
#
#   install            apt-get install the packages (skips quickly when already installed)
#   start              write configs, start munged, MariaDB, slurmdbd, slurmctld, slurmd, register the
#                      cluster/accounts/users, wait for a smoke job COMPLETED in sacct. Installs first
#                      when packages are missing. Idempotent: exits 0 at once when already healthy.
#   install-and-start  same as start (kept for the test runner)
#   stop               cancel all jobs, stop only the daemons this script started (by PID)
#   reset              stop, wipe Slurm state AND the accounting database together, start again
#   status             list daemons, sinfo; exit 0 when healthy, else 1
#   accounting stop|start
#                      stop or start slurmdbd alone (slurmctld keeps running and queues its records),
#                      for tests that stage an accounting outage
#   min-job-age SECONDS|default
#                      set MinJobAge live (scontrol reconfigure): a small value makes finished jobs leave
#                      squeue within seconds, for tests that stage a purge; `default` restores the file
#
# Environment overrides: TESTBED_USERS (extra users given associations; default: $SUDO_USER if set),
# TESTBED_TIMEOUT (seconds for each bounded wait, default 60).
# See tests/slurm/README.md for the cluster shape and measured timings.
set -euo pipefail

readonly CLUSTER=hpctest
readonly STATE_DIR=/var/lib/hpcjobs-testbed
readonly PID_DIR=$STATE_DIR/pids
readonly LOG_DIR=/var/log/hpcjobs-testbed
readonly SLURM_ETC=/etc/slurm
readonly CTLD_STATE=$STATE_DIR/slurmctld
readonly SLURMD_SPOOL=$STATE_DIR/slurmd
readonly GPU_DIR=$STATE_DIR/gpu
readonly JOB_DIR=$STATE_DIR/jobs
readonly MYSQL_DATADIR=/var/lib/mysql
readonly MYSQL_SOCKET=/run/mysqld/mysqld.sock
readonly DB_NAME=slurm_acct_db
readonly DB_USER=slurm
readonly DB_PASS=hpcjobs-testbed   # local socket only (skip-networking); a throwaway test database
readonly TIMEOUT=${TESTBED_TIMEOUT:-60}
readonly PACKAGES=(slurm-wlm slurmdbd slurm-wlm-torque munge mariadb-server mariadb-client tmux)  # tmux: hpcjobs watch is tested in it
readonly DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)

T0=${EPOCHREALTIME/[.,]/}

elapsed() { local now=${EPOCHREALTIME/[.,]/}; printf '%d.%d' $(( (now - T0) / 1000000 )) $(( (now - T0) / 100000 % 10 )); }
log() { printf '[testbed %6ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root (sudo bash $0 $*)"; }
# shellcheck source=tests/testbed_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testbed_lib.sh"

# --------------------------------------------------------------------------- processes by PID

# A PID file holds "PID STARTTIME": the start time (field 22 of /proc/PID/stat) guards against reuse.
proc_starttime() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }
proc_state() { awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null; }

# Prints the PID of our running daemon NAME (not a zombie), or returns 1.
our_pid() {
    local name=$1 pid start
    [[ -r $PID_DIR/$name ]] || return 1
    read -r pid start <"$PID_DIR/$name" || return 1
    [[ -n ${pid:-} && -d /proc/$pid ]] || return 1
    [[ $(proc_starttime "$pid") == "$start" ]] || return 1
    [[ $(proc_state "$pid") != Z ]] || return 1
    echo "$pid"
}

record_pid() { echo "$2 $(proc_starttime "$2")" >"$PID_DIR/$1"; }

# Runs a daemon detached (its own session), logs to LOG_DIR/NAME.out, records its PID.
launch() {
    local name=$1; shift
    # from / : a daemon keeps its start folder as cwd, and slurmstepd inherits it; were it a checkout
    # deleted later, every job step would print "Unable to get current working directory"
    (cd / && exec setsid "$@" </dev/null >>"$LOG_DIR/$name.out" 2>&1) &
    local pid=$!
    sleep 0.05
    record_pid "$name" "$pid"
    log "started $name (pid $pid): $*"
}

# Is some other (not ours) process named NAME running?
foreign_running() {
    local name=$1 mine
    mine=$(our_pid "$name" || true)
    local p
    for p in $(pgrep -x "$name" || true); do
        [[ $p == "$mine" ]] && continue
        [[ $(proc_state "$p") == Z ]] && continue
        return 0
    done
    return 1
}

log_tail() {
    local f
    for f in "$@"; do
        [[ -s $f ]] || continue
        echo "----- last lines of $f -----" >&2
        tail -n 25 "$f" >&2
    done
}

# wait_for DESCRIPTION LOGFILES(comma separated) COMMAND...: poll every 0.2 s, bounded by TIMEOUT.
wait_for() {
    local what=$1 logs=$2; shift 2
    local deadline=$(( $(date +%s) + TIMEOUT ))
    while ! "$@" >/dev/null 2>&1; do
        if (( $(date +%s) >= deadline )); then
            log "TIMEOUT after ${TIMEOUT}s waiting for: $what"
            IFS=, read -ra files <<<"$logs"
            log_tail "${files[@]}"
            exit 1
        fi
        sleep 0.2
    done
    log "ready: $what"
}

# --------------------------------------------------------------------------- install

packages_installed() {
    local p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || return 1
    done
}

cmd_install() {
    need_root install
    if packages_installed; then
        log "packages already installed"
        return 0
    fi
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; made_policy=1
    fi
    # shellcheck disable=SC2064
    trap "[[ $made_policy == 1 ]] && rm -f $policy" EXIT
    apt_need "${PACKAGES[@]}"
    [[ $made_policy == 1 ]] && rm -f "$policy"
    trap - EXIT
    packages_installed || die "packages still missing after apt-get install"
    log "installed: ${PACKAGES[*]}"
}

# --------------------------------------------------------------------------- configuration

spank_pbs_path() {
    local f
    for f in /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pbs.so /usr/lib/*/slurm-wlm/spank_pbs.so \
             /usr/lib/slurm/spank_pbs.so; do
        [[ -e $f ]] && { echo "$f"; return 0; }
    done
    return 1
}

render_slurm_conf() {
    local host=$1
    cat <<EOF
# Written by hpcjobs tests/slurm/testbed.sh -- do not edit (re-run "testbed.sh reset" instead).
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$CTLD_STATE
SlurmdSpoolDir=$SLURMD_SPOOL
SlurmctldPidFile=$STATE_DIR/run/slurmctld.pid
SlurmdPidFile=$STATE_DIR/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
# No cgroups: plain process tracking, memory policed by the accounting gatherer (OverMemoryKill).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Every job gets an .extern step, like production clusters.
PrologFlags=Contain
ReturnToService=2
# Node claims 8 CPUs on a 2-core machine so throttles and side-by-side jobs can be observed.
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
MaxArraySize=101
MaxJobCount=10000
MinJobAge=60
KillWait=5
OverTimeLimit=0
InactiveLimit=0
Waittime=0
# Over-limit requests (e.g. --time above the partition MaxTime) are rejected at submission.
EnforcePartLimits=ALL
GresTypes=gpu
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment,job_script
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=8192 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=01:00:00 State=UP
PartitionName=gpu Nodes=$host MaxTime=01:00:00 State=UP
EOF
}

render_gres_conf() {
    cat <<EOF
# Written by hpcjobs tests/slurm/testbed.sh: two fake GPUs (symlinks to /dev/null).
AutoDetect=off
Name=gpu File=$GPU_DIR/nvidia[0-1]
EOF
}

render_slurmdbd_conf() {
    cat <<EOF
# Written by hpcjobs tests/slurm/testbed.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$LOG_DIR/slurmdbd.log
PidFile=$STATE_DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
EOF
}

render_plugstack() {
    local so
    so=$(spank_pbs_path) || { echo "# spank_pbs.so not found"; return 0; }
    echo "optional $so"
}

# install_file PATH MODE: copy stdin to PATH if different; return 0 if it changed.
install_file() {
    local path=$1 mode=$2 tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [[ -f $path ]] && cmp -s "$tmp" "$path"; then
        rm -f "$tmp"; chmod "$mode" "$path"; return 1
    fi
    install -m "$mode" -o root -g root "$tmp" "$path"
    rm -f "$tmp"
    return 0
}

host_short() { hostname -s; }

write_configs() {
    local host changed=0
    host=$(host_short)
    if ! getent hosts "$host" >/dev/null; then
        hosts_add 127.0.0.1 "$host"
        log "added $host to /etc/hosts"
    fi
    mkdir -p "$SLURM_ETC/plugstack.conf.d" "$GPU_DIR"
    ln -sfn /dev/null "$GPU_DIR/nvidia0"
    ln -sfn /dev/null "$GPU_DIR/nvidia1"
    render_slurm_conf "$host" | install_file "$SLURM_ETC/slurm.conf" 644 && changed=1
    render_gres_conf | install_file "$SLURM_ETC/gres.conf" 644 && changed=1
    render_slurmdbd_conf | install_file "$SLURM_ETC/slurmdbd.conf" 600 && changed=1
    printf 'include %s/plugstack.conf.d/*.conf\n' "$SLURM_ETC" | install_file "$SLURM_ETC/plugstack.conf" 644 \
        && changed=1
    render_plugstack | install_file "$SLURM_ETC/plugstack.conf.d/hpcjobs-testbed-pbs.conf" 644 && changed=1
    # Debian's cgroup.conf is not needed (no cgroup plugins); leave any existing one alone.
    if (( changed )); then
        if any_slurm_running; then
            log "configuration changed while Slurm daemons run: restarting them"
            stop_slurm_daemons
        fi
        log "configuration written to $SLURM_ETC"
    fi
}

# --------------------------------------------------------------------------- daemons

mysql_root() { mariadb --protocol=socket -S "$MYSQL_SOCKET" -uroot "$@"; }
mysql_ping() { mariadb-admin --protocol=socket -S "$MYSQL_SOCKET" -uroot ping; }

start_munge() {
    if our_pid munged >/dev/null; then return 0; fi
    if foreign_running munged; then log "munged already running (not started by this script): using it"; return 0; fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    fi
    install -d -o munge -g munge -m 755 /run/munge
    install -d -o munge -g munge -m 700 /var/lib/munge /var/log/munge
    launch munged setpriv --reuid=munge --regid=munge --clear-groups /usr/sbin/munged -F
    wait_for "munge credential round trip" "$LOG_DIR/munged.out,/var/log/munge/munged.log" \
        bash -c 'munge -n | unmunge'
}

start_mariadb() {
    if our_pid mariadbd >/dev/null; then :
    elif mysql_ping >/dev/null 2>&1; then
        log "MariaDB already answering on $MYSQL_SOCKET (not started by this script): using it"
    else
        if foreign_running mariadbd; then die "a mariadbd runs but does not answer on $MYSQL_SOCKET"; fi
        if [[ ! -d $MYSQL_DATADIR/mysql ]]; then
            log "initialising MariaDB datadir $MYSQL_DATADIR"
            mariadb-install-db --user=mysql --datadir="$MYSQL_DATADIR" --auth-root-authentication-method=socket \
                >>"$LOG_DIR/mariadb-install.out" 2>&1 || { log_tail "$LOG_DIR/mariadb-install.out"; die "mariadb-install-db failed"; }
        fi
        install -d -o mysql -g mysql -m 755 /run/mysqld
        launch mariadbd /usr/sbin/mariadbd --user=mysql --datadir="$MYSQL_DATADIR" --socket="$MYSQL_SOCKET" \
            --pid-file=/run/mysqld/mysqld.pid --log-error="$LOG_DIR/mariadb.log" --skip-networking \
            --innodb-buffer-pool-size=512M --innodb-lock-wait-timeout=900
    fi
    wait_for "MariaDB ping" "$LOG_DIR/mariadb.log,$LOG_DIR/mariadbd.out" mysql_ping
    if [[ ${WIPE_DB:-0} == 1 ]]; then
        mysql_root -e "DROP DATABASE IF EXISTS $DB_NAME"
        log "accounting database $DB_NAME dropped"
    fi
    mysql_root <<EOF
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
EOF
}

slurm_daemon() {  # NAME: start slurmdbd/slurmctld/slurmd in the foreground mode under setsid
    local name=$1
    if our_pid "$name" >/dev/null; then return 0; fi
    foreign_running "$name" && die "$name is running but was not started by this script; stop it first"
    launch "$name" "/usr/sbin/$name" -D
}

cluster_registered() { sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; }

register_accounting() {
    local users=(root) u
    [[ -n ${SUDO_USER:-} && $SUDO_USER != root ]] && users+=("$SUDO_USER")
    for u in ${TESTBED_USERS:-}; do users+=("$u"); done
    cluster_registered || sacctmgr -i add cluster "$CLUSTER" >/dev/null
    local acct
    for acct in hpcjobs other; do
        sacctmgr -n -P show account "$acct" format=account | grep -qx "$acct" \
            || sacctmgr -i add account "$acct" Cluster="$CLUSTER" Description="hpcjobs testbed" Organization=hpcjobs >/dev/null
    done
    for u in "${users[@]}"; do
        sacctmgr -n -P show assoc where user="$u" account=hpcjobs format=user | grep -qx "$u" \
            || sacctmgr -i add user "$u" Account=hpcjobs,other DefaultAccount=hpcjobs >/dev/null
        sacctmgr -i modify user where name="$u" set DefaultAccount=hpcjobs >/dev/null || true
    done
    log "accounting: cluster $CLUSTER, accounts hpcjobs+other, users ${users[*]}"
}

node_state() { sinfo -h -N -n "$(host_short)" -o %T 2>/dev/null | head -n1; }
node_usable() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }
node_idle() { [[ $(node_state) == idle ]]; }

smoke_job_done() {  # JOBID: COMPLETED with a complete accounting row
    local row
    row=$(sacct -j "$1" -X -n -P -o State,JobName,Partition 2>/dev/null | head -n1)
    [[ $row == "COMPLETED|testbed-smoke|debug" ]]
}

smoke_test() {
    mkdir -p "$JOB_DIR"
    local id
    id=$(sbatch --parsable -J testbed-smoke -p debug -A hpcjobs -t 1 -n 1 --chdir="$JOB_DIR" \
        -o "$JOB_DIR/smoke-%j.out" --wrap 'hostname') || die "smoke job submission failed"
    id=${id%%;*}
    log "smoke job $id submitted"
    wait_for "smoke job $id COMPLETED in sacct" "$LOG_DIR/slurmctld.log,$LOG_DIR/slurmd.log,$LOG_DIR/slurmdbd.log" \
        smoke_job_done "$id"
}

healthy() {
    local d
    for d in "${DAEMONS[@]}"; do
        our_pid "$d" >/dev/null || foreign_running "$d" || return 1
    done
    timeout 10 bash -c 'munge -n | unmunge' >/dev/null 2>&1 || return 1
    timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' || return 1
    timeout 10 sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER" || return 1
    timeout 10 sacct -n -X -j 1 >/dev/null 2>&1 || return 1
    node_usable
}

cmd_start() {
    need_root start
    packages_installed || cmd_install
    mkdir -p "$PID_DIR" "$LOG_DIR" "$STATE_DIR/run" "$CTLD_STATE" "$SLURMD_SPOOL" "$JOB_DIR"
    if [[ ${WIPE_DB:-0} != 1 ]] && healthy \
        && render_slurm_conf "$(host_short)" | cmp -s - "$SLURM_ETC/slurm.conf"; then
        log "testbed already running and healthy"
        return 0
    fi
    write_configs
    start_munge
    start_mariadb
    slurm_daemon slurmdbd
    wait_for "slurmdbd answers (sacctmgr)" "$LOG_DIR/slurmdbd.log,$LOG_DIR/slurmdbd.out" \
        sacctmgr -n show cluster
    register_accounting
    slurm_daemon slurmctld
    wait_for "slurmctld UP (scontrol ping)" "$LOG_DIR/slurmctld.log,$LOG_DIR/slurmctld.out" \
        bash -c 'scontrol ping | grep -q "is UP"'
    slurm_daemon slurmd
    if ! wait_for_quiet 15 node_idle; then
        # A drained/down node (e.g. left from an earlier config) is resumed once.
        scontrol update nodename="$(host_short)" state=resume 2>/dev/null || true
    fi
    wait_for "node $(host_short) idle" "$LOG_DIR/slurmd.log,$LOG_DIR/slurmctld.log,$LOG_DIR/slurmd.out" node_usable
    smoke_test
    log "testbed up: cluster $CLUSTER ($(sinfo -h -o '%P' | tr '\n' ' '))"
}

wait_for_quiet() {  # SECONDS COMMAND...: like wait_for, but returns 1 instead of failing
    local deadline=$(( $(date +%s) + $1 )); shift
    until "$@" >/dev/null 2>&1; do
        (( $(date +%s) >= deadline )) && return 1
        sleep 0.2
    done
}

# stop_daemon NAME: SIGTERM, then SIGKILL after 20 s; a zombie counts as stopped.
stop_daemon() {
    local name=$1 pid i
    pid=$(our_pid "$name") || { rm -f "$PID_DIR/$name"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for (( i = 0; i < 100; i++ )); do
        our_pid "$name" >/dev/null || break
        sleep 0.2
    done
    if our_pid "$name" >/dev/null; then
        log "$name (pid $pid) ignored SIGTERM for 20 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$PID_DIR/$name"
    log "stopped $name (pid $pid)"
}

no_jobs_listed() { [[ -z $(squeue -h -o %A 2>/dev/null) ]]; }

any_slurm_running() {
    local d
    for d in slurmd slurmctld slurmdbd; do our_pid "$d" >/dev/null && return 0; done
    return 1
}

stop_slurm_daemons() {
    if our_pid slurmctld >/dev/null; then
        local ids
        ids=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)
        if [[ -n ${ids// } ]]; then
            # shellcheck disable=SC2086
            timeout 10 scancel $ids 2>/dev/null || true
            wait_for_quiet 15 no_jobs_listed || log "jobs still listed after scancel"
            log "cancelled jobs: $ids"
        fi
    fi
    stop_daemon slurmd
    stop_daemon slurmctld
    stop_daemon slurmdbd
}

cmd_stop() {
    need_root stop
    mkdir -p "$PID_DIR"
    stop_slurm_daemons
    stop_daemon mariadbd
    stop_daemon munged
    log "testbed stopped"
}

cmd_reset() {
    need_root reset
    cmd_stop
    rm -rf "${CTLD_STATE:?}" "${SLURMD_SPOOL:?}" "${JOB_DIR:?}"
    log "Slurm state wiped ($CTLD_STATE, $SLURMD_SPOOL)"
    WIPE_DB=1 cmd_start
}

cmd_status() {
    local d pid rc=0
    for d in "${DAEMONS[@]}"; do
        if pid=$(our_pid "$d"); then echo "$d: running (pid $pid, started by testbed)"
        elif foreign_running "$d"; then echo "$d: running (not started by testbed)"
        else echo "$d: NOT running"; fi
    done
    timeout 10 sinfo 2>&1 || true
    if healthy; then echo "testbed: healthy"; else echo "testbed: NOT healthy"; rc=1; fi
    return $rc
}

# accounting stop|start: an accounting outage, staged. slurmctld keeps its records for slurmdbd and sends
# them when it is back.
cmd_accounting() {
    need_root accounting
    case ${1:-} in
        stop) stop_daemon slurmdbd ;;
        start)
            slurm_daemon slurmdbd
            wait_for "slurmdbd answers (sacctmgr)" "$LOG_DIR/slurmdbd.log,$LOG_DIR/slurmdbd.out" \
                sacctmgr -n show cluster
            ;;
        *) echo "usage: $0 accounting {stop|start}" >&2; exit 2 ;;
    esac
}

# The largest job id slurmctld (squeue) or slurmdbd (sacct, last day) knows.
highest_job_id() {
    { timeout 10 squeue -h -t all -o %A 2>/dev/null; timeout 10 sacct -a -X -n -P -o JobIDRaw -S now-1day 2>/dev/null; } \
        | grep -E '^[0-9]+$' | sort -n | tail -n1
}

# bump_job_ids_past ID: submit (held) and cancel throwaway jobs until a new job's id is above ID.
# Seen on this Slurm 22.05: after `scontrol reconfigure`, with the newest jobs already purged from memory
# (a small MinJobAge), slurmctld handed out ids again that those jobs had had; every later `sacct -j ID`
# then mixed two jobs.
bump_job_ids_past() {
    local want=$1 id n
    [[ -n $want ]] || return 0
    for (( n = 0; n < 1000; n++ )); do
        id=$(sbatch --parsable --hold -J testbed-id-bump -p debug -A hpcjobs -t 1 -o /dev/null --wrap true) \
            || die "could not submit a job to move the job ids on"
        id=${id%%;*}
        scancel "$id" 2>/dev/null || true
        (( id > want )) && return 0
    done
    die "job ids did not move past $want"
}

# resume_prolog_drains SECONDS: for SECONDS, resume the node whenever it is drained for "Prolog error".
# Seen on this Slurm 22.05: a `scontrol reconfigure` while slurmd is launching array tasks times out
# the launch messages; 20 s later slurmd gives up waiting for the task's prolog notification and
# slurmctld drains the node ("Prolog error"), so every later job waits for ever. Only the testbed's own
# reconfigure (min-job-age, staged by the tests) does this; the requeued tasks then run normally.
resume_prolog_drains() {
    local until=$(( SECONDS + $1 )) node
    node=$(host_short)
    while (( SECONDS < until )); do
        if sinfo -h -N -n "$node" -o '%E' 2>/dev/null | grep -q '^Prolog error'; then
            scontrol update nodename="$node" state=resume 2>/dev/null \
                && log "resumed $node, drained by a launch that the reconfigure interrupted"
        fi
        sleep 1
    done
}

# min-job-age SECONDS|default: how long a finished job stays in slurmctld's memory (and squeue).
cmd_min_job_age() {
    need_root min-job-age
    local value=${1:-} highest
    highest=$(highest_job_id)
    if [[ $value == default ]]; then
        render_slurm_conf "$(host_short)" | install_file "$SLURM_ETC/slurm.conf" 644 || true
    elif [[ $value =~ ^[0-9]+$ ]] && (( value >= 2 )); then
        sed -i "s/^MinJobAge=.*/MinJobAge=$value/" "$SLURM_ETC/slurm.conf"
    else
        echo "usage: $0 min-job-age {SECONDS (2 or more)|default}" >&2; exit 2
    fi
    scontrol reconfigure
    # in the background, detached, for longer than slurmd's 20-s wait for a prolog notification
    (resume_prolog_drains 40 </dev/null >>"$LOG_DIR/prolog-drains.log" 2>&1 &)
    bump_job_ids_past "$highest"
    log "MinJobAge: $(scontrol show config | awk '$1 == "MinJobAge" {print $3, $4}'), job ids past ${highest:-none}"
}

main() {
    local cmd=${1:-}
    case $cmd in
        accounting) cmd_accounting "${2:-}" ;;
        min-job-age) cmd_min_job_age "${2:-}" ;;
        install) cmd_install ;;
        start | install-and-start) cmd_start ;;
        stop) cmd_stop ;;
        reset) cmd_reset ;;
        status) cmd_status ;;
        *) echo "usage: $0 {install|start|install-and-start|stop|reset|status|accounting|min-job-age}" >&2; exit 2 ;;
    esac
}

main "$@"
