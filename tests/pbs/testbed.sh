#!/usr/bin/env bash
# hpcjobs one-node OpenPBS testbed (Debian 12, OpenPBS 23.06 built from its source).
#
# Usage (as root):  bash tests/pbs/testbed.sh {start|stop|status|reset|build}
#
#   build    install /opt/pbs: restore a cached build when one exists, else build it from the vendored
#            source (apt build dependencies, autogen, configure, make, make install) and cache it
#   start    build if needed, post-install, fix the hostname, start the server, scheduler, comm and
#            mom, configure the server for tests, wait until the node is free and a smoke job submitted
#            by the unprivileged user finishes. Idempotent: exits 0 quickly when already healthy.
#   stop     delete every job and stop the daemons
#   reset    delete every job (forced) and purge the job history, then start
#   status   qstat -B and the node; exit 0 when healthy, else 1
#
# Where the build comes from, first match wins:
#   $PBS_TGZ                                         a tarball of /opt/pbs (tar -C / -czf X opt/pbs)
#   $PBS_CACHE_DIR/opt-pbs-$PBS_COMMIT-debian12.tgz  the cache this script writes after a build
#                                                    (PBS_CACHE_DIR defaults to /var/cache/hpcjobs)
#   ../shared/vendor/openpbs/opt-pbs-$PBS_COMMIT-debian12.tgz beside the checkout, when present
#   tests/pbs/vendor/openpbs-$PBS_COMMIT.tar.gz      the OpenPBS source (AGPL-3.0-or-later), built here
#
# Server shape (what the `pbs` tests rely on; see tests/pbs/README.md):
#   flatuid, job_history_enable, scheduler_iteration 5 s, acl_roots root (the suite runs as root in CI),
#   server max_array_size $PBS_MAX_ARRAY (20: sweeps of more points are chunked), queue workq with
#   resources_max.walltime 02:00:00 and resources_max.ncpus 2, custom resource ngpus (node: 2),
#   an unprivileged user $PBS_USER for the smoke job and the user tests.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
readonly PBS_COMMIT=cd7ab5e
readonly PBS_EXEC=/opt/pbs
readonly PBS_HOME=/var/spool/pbs
readonly PBS_USER=${PBS_USER:-hpcpbs}
readonly PBS_MAX_ARRAY=${PBS_MAX_ARRAY:-20}
readonly TIMEOUT=${TESTBED_TIMEOUT:-90}
readonly JOBS=${JOBS:-2}
readonly PBS_CACHE_DIR=${PBS_CACHE_DIR:-/var/cache/hpcjobs}
readonly CACHE_TGZ=$PBS_CACHE_DIR/opt-pbs-$PBS_COMMIT-debian12.tgz
readonly SRC_TGZ=${SRC_TGZ:-$HERE/vendor/openpbs-$PBS_COMMIT.tar.gz}
readonly SRC_DIR=${SRC_DIR:-/var/tmp/openpbs-src-$PBS_COMMIT}
readonly BUILD_DEPS=(gcc g++ make libtool autoconf automake pkg-config libhwloc-dev libx11-dev libxt-dev
    libedit-dev libical-dev libncurses-dev perl postgresql-server-dev-all python3-dev tcl-dev tk-dev swig
    libexpat1-dev libssl-dev libxext-dev libxft-dev libcjson-dev)
readonly RUN_DEPS=(expat libedit2 postgresql postgresql-contrib python3 sudo tcl tk libical3 libcjson1
    iproute2 libhwloc15 libpython3.11)
export DEBIAN_FRONTEND=noninteractive
# PBS's own clients first for the programs this script starts (pbs_postinstall, the init script).
export PATH=$PBS_EXEC/bin:$PBS_EXEC/sbin:$PATH

# PBS's own clients, always by full path, never looked up: slurm-wlm-torque ships /usr/bin/qsub, qstat
# and pbsnodes that are Slurm's, and bash remembers (hashes) the first qstat it finds. A lookup made
# before /opt/pbs exists would keep running Slurm's wrapper after the build.
qstat() { "$PBS_EXEC/bin/qstat" "$@"; }
qmgr() { "$PBS_EXEC/bin/qmgr" "$@"; }
qdel() { "$PBS_EXEC/bin/qdel" "$@"; }
qselect() { "$PBS_EXEC/bin/qselect" "$@"; }
pbsnodes() { "$PBS_EXEC/bin/pbsnodes" "$@"; }

T0=${EPOCHREALTIME/[.,]/}
elapsed() { local now=${EPOCHREALTIME/[.,]/}; printf '%d.%d' $(( (now - T0) / 1000000 )) $(( (now - T0) / 100000 % 10 )); }
log() { printf '[pbs-testbed %6ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root (sudo bash $0 $1)"; }
# shellcheck source=tests/testbed_lib.sh
. "$HERE/../testbed_lib.sh"

STARTED_HERE=0
on_exit() {  # a start that fails stops the daemons it started: no half-configured server is left running
    local rc=$?
    if (( rc != 0 && STARTED_HERE )); then
        log "start failed (exit $rc): stopping the PBS daemons it started"
        /etc/init.d/pbs stop >/dev/null 2>&1 || true
    fi
    return "$rc"
}
trap on_exit EXIT

cached_build() {  # prints the first tarball of /opt/pbs that exists
    local c
    for c in "${PBS_TGZ:-}" "$CACHE_TGZ" "$ROOT/../shared/vendor/openpbs/opt-pbs-$PBS_COMMIT-debian12.tgz"; do
        [[ -n $c && -f $c ]] && { echo "$c"; return 0; }
    done
    return 1
}

failed() {  # failed LOG: show the end of a failed build step; the next start builds in a clean tree
    tail -40 "$1" >&2
    cd / && rm -rf "$SRC_DIR"
    die "the OpenPBS build failed (above: the end of $1); its source tree is removed"
}

build() {
    need_root build
    if [[ -x $PBS_EXEC/sbin/pbs_server.bin ]]; then
        apt_need "${RUN_DEPS[@]}"
        return 0
    fi
    local tgz
    if tgz=$(cached_build); then
        apt_need "${RUN_DEPS[@]}"
        log "restoring $PBS_EXEC from $tgz"
        tar -C / -xzf "$tgz"
    else
        [[ -f $SRC_TGZ ]] || die "no cached build and no OpenPBS source at $SRC_TGZ"
        apt_need "${RUN_DEPS[@]}" "${BUILD_DEPS[@]}"
        if [[ ! -f $SRC_DIR/configure.ac ]]; then
            mkdir -p "$SRC_DIR"
            tar -xzf "$SRC_TGZ" -C "$SRC_DIR" --strip-components=1
        fi
        (
            cd "$SRC_DIR"
            [[ -x configure ]] || { log "autogen"; ./autogen.sh >autogen.log 2>&1; }
            # Debian's python3 (its headers come with python3-dev), never a $PYTHON or a python3 earlier in PATH
            [[ -f Makefile ]] || { log "configure --prefix=$PBS_EXEC"; PYTHON=/usr/bin/python3 ./configure --prefix="$PBS_EXEC" >configure.log 2>&1; }
            log "make -j$JOBS (several minutes)"
            make -j"$JOBS" >make.log 2>&1 || failed make.log
            log "make install"
            make install >install.log 2>&1 || failed install.log
        )
        rm -rf "$SRC_DIR"  # the build is in the cache now
        mkdir -p "$PBS_CACHE_DIR"
        tar -C / -czf "$CACHE_TGZ.tmp" opt/pbs && mv "$CACHE_TGZ.tmp" "$CACHE_TGZ"
        log "cached the build in $CACHE_TGZ"
        hash -r
    fi
    chmod 4755 "$PBS_EXEC/sbin/pbs_iff" "$PBS_EXEC/sbin/pbs_rcp"
}

fix_hostname() {  # PBS ignores loopback addresses: the hostname must resolve to another IPv4 address
    local h ip
    h=$(hostname)
    getent ahostsv4 "$h" | awk '{print $1}' | grep -qv '^127\.' && return 0
    ip=$(ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
    [[ -n $ip ]] || ip=$(ip -4 -o addr show scope global | awk '{split($4,a,"/"); print a[1]; exit}')
    [[ -n $ip ]] || die "no non-loopback IPv4 address: PBS cannot start"
    log "adding '$ip $h' to /etc/hosts"
    hosts_add "$ip" "$h"
}

node_reported() { local nodes; nodes=$(pbsnodes -a 2>/dev/null) && grep -q 'state = free' <<<"$nodes" && grep -q resources_available.ncpus <<<"$nodes"; }

healthy() {
    qstat -B >/dev/null 2>&1 && pbsnodes -a 2>/dev/null | grep -q 'state = free'
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    local deadline=$(( SECONDS + limit ))
    until "$@" >/dev/null 2>&1; do
        (( SECONDS < deadline )) || return 1
        sleep 0.5
    done
    log "$what"
}

configure_server() {
    local node
    node=$(pbsnodes -a | awk 'NF && $0 !~ /^ / {print; exit}')
    qmgr -c "set server flatuid = true"                 # else 'Bad UID for job execution' (owner user@localhost)
    qmgr -c "set server job_history_enable = true"      # qstat -x
    qmgr -c "set server job_history_duration = 24:00:00"
    qmgr -c "set server scheduler_iteration = 5"        # default 600 s
    qmgr -c "set server acl_roots = root"               # the suite runs as root in CI
    qmgr -c "set server max_array_size = $PBS_MAX_ARRAY"
    qmgr -c "set queue workq resources_max.walltime = 02:00:00"
    qmgr -c "set queue workq resources_max.ncpus = 2"
    qmgr -c "list resource ngpus" >/dev/null 2>&1 || qmgr -c "create resource ngpus type=long, flag=nh"
    if ! grep -q '^resources:.*ngpus' "$PBS_HOME/sched_priv/sched_config"; then
        sed -i 's/^resources: "\(.*\)"/resources: "\1, ngpus"/' "$PBS_HOME/sched_priv/sched_config"
        pkill -HUP -x pbs_sched || true
    fi
    [[ -n $node ]] && qmgr -c "set node $node resources_available.ngpus = 2"
    # the mom checks walltime and cpu use every 10-120 s by default: a 5 s walltime limit was seen to
    # run 2 min, and jobs of a few seconds recorded cput 0. Poll every 1-5 s (pbs_mom(8) $min_check_poll)
    local momconf=$PBS_HOME/mom_priv/config
    # shellcheck disable=SC2016  # the $ is part of the mom's option names
    if ! grep -q '^\$max_check_poll' "$momconf" 2>/dev/null; then
        # shellcheck disable=SC2016
        printf '$min_check_poll 1\n$max_check_poll 5\n' >>"$momconf"
        pkill -HUP -x pbs_mom || true
    fi
    return 0
}

smoke() {
    id "$PBS_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$PBS_USER"
    local jid state
    jid=$(runuser -u "$PBS_USER" -- bash -c "cd ~ && $PBS_EXEC/bin/qsub -N smoke -l walltime=00:01:00 -- /bin/true") \
        || die "the smoke job was refused"
    local deadline=$(( SECONDS + TIMEOUT ))
    while :; do
        state=$(qstat -x -f "$jid" 2>/dev/null | awk '/job_state/{print $3}')
        [[ $state == F ]] && break
        (( SECONDS < deadline )) || die "smoke job $jid still in state '${state:-?}' after ${TIMEOUT}s"
        sleep 0.3
    done
    log "smoke job $jid by $PBS_USER finished"
}

start() {
    need_root start
    if healthy && [[ -f $PBS_HOME/.hpcjobs-configured ]]; then
        log "already up: $(qstat -B | awk 'NR==3{print $1}')"
        return 0
    fi
    build
    fix_hostname
    if [[ ! -f /etc/pbs.conf || ! -x /etc/init.d/pbs ]]; then
        log "pbs_postinstall"
        "$PBS_EXEC/libexec/pbs_postinstall" >/dev/null
    fi
    sed -i 's/^PBS_START_MOM=0/PBS_START_MOM=1/' /etc/pbs.conf
    if ! qstat -B >/dev/null 2>&1; then
        log "starting PBS (the first start creates the postgres datastore)"
        STARTED_HERE=1
        /etc/init.d/pbs start >"${TMPDIR:-/tmp}/pbs-start.log" 2>&1 || { cat "${TMPDIR:-/tmp}/pbs-start.log" >&2; die "pbs start failed"; }
    fi
    # the first start creates the datastore: 15 s on an idle machine, 100 s seen under load
    wait_for 300 "server answers" qstat -B || die "pbs_server does not answer (see /var/spool/pbs/server_logs)"
    configure_server
    wait_for "$TIMEOUT" "node free" node_reported \
        || die "the mom never reported in: $(pbsnodes -a 2>&1 | head -5)"
    smoke
    touch "$PBS_HOME/.hpcjobs-configured"
    log "up: $(qstat -B | awk 'NR==3{print $1}'), OpenPBS $(qstat --version 2>&1 | awk '{print $NF}')"
}

delete_all_jobs() {
    local ids=()
    mapfile -t ids < <(qselect 2>/dev/null || true)
    if ((${#ids[@]})); then qdel -W force "${ids[@]}" >/dev/null 2>&1 || true; fi
}

stop() {
    need_root stop
    [[ -x /etc/init.d/pbs ]] || { log "not installed"; return 0; }
    qstat -B >/dev/null 2>&1 && delete_all_jobs
    /etc/init.d/pbs stop >/dev/null 2>&1 || true
    log "stopped"
}

reset() {
    need_root reset
    if qstat -B >/dev/null 2>&1; then
        delete_all_jobs
        # purge finished jobs from the history: -x lists them, -Wforce -x deletes history records
        local ids=()
        mapfile -t ids < <(qselect -x -s F 2>/dev/null || true)
        if ((${#ids[@]})); then qdel -x -W force "${ids[@]}" >/dev/null 2>&1 || true; fi
    fi
    start
}

status() {
    if healthy; then
        qstat -B
        pbsnodes -a | grep -E '^\S|state =|resources_available\.(ncpus|ngpus)'
        return 0
    fi
    echo "OpenPBS testbed is not healthy" >&2
    return 1
}

case ${1:-} in
    build) build ;;
    start) start ;;
    stop) stop ;;
    reset) reset ;;
    status) status ;;
    *) echo "usage: $0 {start|stop|status|reset|build}" >&2; exit 2 ;;
esac
