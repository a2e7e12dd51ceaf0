#!/usr/bin/env bash
# The fresh-machine drill: make this machine look like a fresh Debian 12 box again, then run the
# README's test command on a plain clone of main with nothing beside it, and print how long each
# testbed's first start and the suite took.
#
# Usage (as root; it stops and purges every testbed on this machine):
#   bash scripts/fresh-machine-drill.sh [--purge-only] [--branch BRANCH] [--keep DIR]
#
#   --purge-only   purge, then stop (no clone, no test run)
#   --branch B     the branch to clone (default main) from the repository this script is in
#   --keep DIR     run the drill in DIR (default: a new folder under /var/tmp, removed after a green run)
#
# What is purged (everything the testbed scripts install, build or write, and nothing the image had):
#   - the testbeds' daemons (each script's `stop`, then any leftover process of theirs by name)
#   - Debian packages: those the testbeds' apt_need recorded installing in
#     /var/lib/hpcjobs-testbed-packages.txt, and those only a testbed installs (Slurm, munge, MariaDB,
#     docker.io, etcd, Go, the Kubernetes client, shellcheck, chromium); then what apt installed with them
#     (apt-get autoremove --purge). A package the machine had before a testbed ran stays.
#   - state: /etc/slurm, /etc/munge, MariaDB's data, /opt/pbs, /var/spool/pbs, /etc/pbs.conf, the PBS
#     init script and user, /var/lib/hpcjobs-testbed (Swarm's Docker data root, Kubernetes' binaries and
#     state), /var/log/hpcjobs-testbed, /var/cache/hpcjobs (the build caches), the source trees of
#     builds, the deb-src lists a testbed adds, and the /etc/hosts lines tagged by a testbed
# The pip cache and the image's own packages (gcc, make, PostgreSQL, Python) stay: a fresh CI machine
# has them too.
#
# Exit status: that of `bash scripts/test.sh` (0 when the suite passed), or 1 when the purge failed.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel)
BRANCH=main
PURGE_ONLY=0
KEEP=
while (($#)); do
    case $1 in
        --purge-only) PURGE_ONLY=1 ;;
        --branch) BRANCH=${2:?--branch needs a name}; shift ;;
        --keep) KEEP=${2:?--keep needs a folder}; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

T0=$SECONDS
log() { printf '[drill %5ss] %s\n' "$(( SECONDS - T0 ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || die "run it as root: it purges system packages (sudo bash $0)"
command -v apt-get >/dev/null || die "needs a Debian machine (apt-get)"
export DEBIAN_FRONTEND=noninteractive
export SUDO_FORCE_REMOVE=yes  # sudo is purged only when a testbed installed it (the machine had none)

readonly TESTBED_DIR=/var/lib/hpcjobs-testbed
readonly HOSTS_TAG="# added by the hpcjobs testbed"   # tests/testbed_lib.sh tags its /etc/hosts lines so
readonly APT_RECORD=/var/lib/hpcjobs-testbed-packages.txt  # what tests/testbed_lib.sh's apt_need installed
# and what only a testbed or scripts/test.sh installs (a fresh Debian image has none of them): purged even
# without a record. Build dependencies that an image may carry (compilers, -dev libraries) are purged only
# when the record says a testbed installed them.
readonly TESTBED_ONLY=(
    slurm-wlm slurm-wlm-basic-plugins slurm-wlm-torque slurmctld slurmd slurmdbd slurm-client sview
    munge libmunge2 mariadb-server mariadb-client galera-4
    docker.io containerd runc tini busybox-static
    podman crun catatonit conmon
    etcd-server etcd-client golang-go golang-1.19-go golang-github-modern-go-reflect2-dev
    kubernetes-client conntrack shellcheck chromium
)
stop_testbeds() {
    local tb
    # containers of jobs (tests/containers/podman.sh): gone before their storage is unmounted
    command -v podman >/dev/null 2>&1 && { timeout 60 podman rm -a -f -t 0 >/dev/null 2>&1 || true; }
    for tb in ssh kubernetes swarm pbs slurm; do
        [[ -f $REPO/tests/$tb/testbed.sh ]] || continue
        timeout 120 bash "$REPO/tests/$tb/testbed.sh" stop >/dev/null 2>&1 || log "($tb testbed stop: not running or failed; killing by name)"
    done
    [[ -x /etc/init.d/pbs ]] && { timeout 60 /etc/init.d/pbs stop >/dev/null 2>&1 || true; }
    local names=(kubelet kube-scheduler kube-controller-manager kube-apiserver etcd dockerd containerd
        containerd-shim containerd-shim-runc-v2 slurmd slurmctld slurmdbd mariadbd mysqld munged
        pbs_mom pbs_comm pbs_sched pbs_server.bin pbs_ds_monitor)
    local n
    for n in "${names[@]}"; do pkill -x "$n" 2>/dev/null || true; done
    pkill -f "$PBS_DATASTORE" 2>/dev/null || true   # PBS's own PostgreSQL
    sleep 2
    for n in "${names[@]}"; do pkill -9 -x "$n" 2>/dev/null || true; done
    pkill -9 -f "$PBS_DATASTORE" 2>/dev/null || true
}
readonly PBS_DATASTORE=/var/spool/pbs/datastore

unmount_under() {  # unmount everything mounted under the given folders, deepest first
    local dirs m
    dirs=$(printf '%s\n' "$@")
    awk -v dirs="$dirs" 'BEGIN { n = split(dirs, d, "\n") }
        { for (i = 1; i <= n; i++) if ($2 == d[i] || index($2, d[i] "/") == 1) { print $2; break } }' /proc/mounts \
        | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

purge_packages() {
    local present=() p
    local recorded=()
    [[ -f $APT_RECORD ]] && mapfile -t recorded < <(sort -u "$APT_RECORD")
    for p in "${TESTBED_ONLY[@]}" "${recorded[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' && present+=("$p")
    done
    dpkg --configure -a >/dev/null 2>&1 || true
    if ((${#present[@]})); then
        log "apt-get purge ${present[*]}"
        apt-get purge -y -q "${present[@]}" >/dev/null || die "apt-get purge failed"
    fi
    # what apt installed with them, and only that: autoremove takes no package the machine asked for
    log "apt-get autoremove --purge"
    apt-get autoremove --purge -y -q >/dev/null || die "apt-get autoremove failed"
    rm -f "$APT_RECORD"
}

remove_state() {
    rm -f /etc/apt/sources.list.d/hpcjobs-deb-src.sources /etc/apt/sources.list.d/hpcjobs-deb-src.list
    if grep -qF "$HOSTS_TAG" /etc/hosts; then
        # /etc/hosts is often a bind mount in containers: write it in place, never replace it
        local kept
        kept=$(grep -vF "$HOSTS_TAG" /etc/hosts)
        printf '%s\n' "$kept" >/etc/hosts
        log "removed the testbeds' lines from /etc/hosts"
    fi
    unmount_under "$TESTBED_DIR" /run/hpcjobs-docker /run/docker /var/lib/docker  # the Swarm exec-root holds netns mounts
    unmount_under /run/hpcjobs-containers /run/libpod /run/containers
    # Podman's files that dpkg does not own: only those tests/containers/podman.sh wrote
    grep -qsF "Written by hpcjobs tests/containers/podman.sh" /etc/containers/storage.conf && rm -f /etc/containers/storage.conf
    rm -f /etc/containers/containers.conf.d/50-hpcjobs-testbed.conf
    rmdir /etc/containers/containers.conf.d /etc/containers 2>/dev/null || true
    ip link delete cni-podman0 2>/dev/null || true
    ip link delete docker0 2>/dev/null || true
    ip link delete docker_gwbridge 2>/dev/null || true
    id hpcpbs >/dev/null 2>&1 && { userdel -r hpcpbs >/dev/null 2>&1 || userdel hpcpbs || true; }
    id hpcssh >/dev/null 2>&1 && { userdel -r hpcssh >/dev/null 2>&1 || userdel hpcssh || true; }
    # --one-file-system: a mount the unmount above missed is never descended into
    rm -rf --one-file-system \
        "$TESTBED_DIR" /var/log/hpcjobs-testbed /var/cache/hpcjobs /run/hpcjobs-docker \
        /opt/pbs /var/spool/pbs /etc/pbs.conf /etc/init.d/pbs /etc/profile.d/pbs.sh /etc/profile.d/pbs.csh \
        /var/tmp/hpcjobs-k8s-src /var/tmp/openpbs-src-* /tmp/openpbs-src-* \
        /etc/slurm /var/lib/slurm /var/log/slurm /var/spool/slurm /var/spool/slurmd /var/spool/slurmctld \
        /etc/munge /var/lib/munge /var/log/munge /run/munge \
        /var/lib/mysql /etc/mysql /run/mysqld \
        /var/lib/docker /var/lib/containerd /etc/docker /run/docker /run/docker.sock /run/containerd \
        /run/lock/hpcjobs-testbed-apt.lock \
        /run/hpcjobs-containers /run/libpod /run/containers /var/lib/cni
}

check_purged() {
    local left=() p
    for p in /opt/pbs /var/spool/pbs /etc/pbs.conf /var/cache/hpcjobs "$TESTBED_DIR" /etc/slurm; do
        [[ -e $p ]] && left+=("$p")
    done
    for p in /etc/containers/containers.conf.d/50-hpcjobs-testbed.conf /run/hpcjobs-containers; do
        [[ -e $p ]] && left+=("$p")
    done
    for p in sbatch slurmctld munged mariadbd dockerd etcd go shellcheck chromium podman; do
        command -v "$p" >/dev/null && left+=("$(command -v "$p")")
    done
    ((${#left[@]} == 0)) || die "still there after the purge: ${left[*]}"
    apt-get update -q >/dev/null || die "apt-get update fails after the purge"
}

log "stopping the testbeds"
stop_testbeds
log "purging what the testbeds installed and built"
purge_packages
remove_state
check_purged
log "purged in $(( SECONDS - T0 )) s; apt works"
((PURGE_ONLY)) && exit 0

# A plain clone of the branch, with nothing beside it (no ../shared), and a new virtual environment
if [[ -n $KEEP ]]; then
    mkdir -p "$KEEP"; DRILL=$(cd "$KEEP" && pwd)
else
    DRILL=$(mktemp -d /var/tmp/hpcjobs-drill.XXXXXX)
fi
[[ ! -e $DRILL/hpcjobs ]] || die "$DRILL/hpcjobs exists: use an empty --keep folder"
log "cloning $BRANCH of $REPO into $DRILL/hpcjobs"
git clone --quiet --branch "$BRANCH" "$REPO" "$DRILL/hpcjobs"
[[ ! -e $DRILL/shared ]] || die "$DRILL/shared exists: the clone must have nothing beside it"
log "commit $(git -C "$DRILL/hpcjobs" log -1 --format='%h %s' | cut -c1-100)"
python3 -m venv "$DRILL/venv"
LOG=$DRILL/test.log
log "bash scripts/test.sh (CI=true); its output: $LOG"

suite_start=$SECONDS
set +e
(cd "$DRILL/hpcjobs" && CI=true PYTHON="$DRILL/venv/bin/python" bash scripts/test.sh) 2>&1 \
    | while IFS= read -r line; do
        printf '%s\n' "$line" >>"$LOG"
        case $line in
            "== "*|*"ERROR"*|*"FAILED"*|*" passed"*|*" failed"*) printf '[drill %5ss] %s\n' "$(( SECONDS - T0 ))" "$line" >&2 ;;
        esac
    done
rc=${PIPESTATUS[0]}
set -e
total=$(( SECONDS - suite_start ))

log "---------------------------------------------------------------- summary"
# what scripts/test.sh timed: each testbed, the Kubernetes build, each part of the suite
grep -E '^== .*( up in | ready | took )[0-9]+ s' "$LOG" | sed 's/^== /  /' >&2 || true
grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$LOG" | sed 's/^/  pytest: /' >&2 || true
printf '  scripts/test.sh in all %d s (%d min)\n' "$total" "$(( total / 60 ))" >&2
if apt-get update -q >/dev/null 2>&1; then log "apt works after the run"; else log "apt-get update FAILS after the run"; ((rc)) || rc=1; fi
mkdir -p /var/tmp/hpcjobs-drill-logs
cp "$LOG" "/var/tmp/hpcjobs-drill-logs/$(date +%Y%m%d-%H%M%S)-rc$rc.log"
if ((rc == 0)); then
    log "GREEN: scripts/test.sh passed on a purged machine from a plain clone"
    [[ -n $KEEP ]] || rm -rf "$DRILL"
else
    log "RED: scripts/test.sh exited $rc; the clone and $LOG stay for a look"
fi
exit "$rc"
